//! A step id split into its layer and in-layer name, and the stack it belongs to.

use super::steps;

/// Splits `layers.3.attn.q` into (Some(3), "attn.q"), and a second stack's ids as well
/// (`decoder.layers.3.cross_attn.q` into (Some(3), "cross_attn.q"), `decoder.embed.out` into
/// (None, "embed.out")): the stack stays in the id ([`stack_of`]); other ids have no layer.
pub fn split_id(id: &str) -> (Option<usize>, &str) {
    match steps::parse_layer_id(id) {
        Some((_, l, name)) => (Some(l), name),
        None => (None, unstacked(id)),
    }
}

/// The stack a step id belongs to: `encoder.…`, `decoder.…`, else the one stack.
pub fn stack_of(id: &str) -> steps::Stack {
    [steps::Stack::Encoder, steps::Stack::Decoder]
        .into_iter()
        .find(|s| id.starts_with(s.prefix()))
        .unwrap_or(steps::Stack::Only)
}

/// `id` without its stack's prefix.
fn unstacked(id: &str) -> &str {
    id.strip_prefix(stack_of(id).prefix()).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_ids() {
        assert_eq!(split_id("layers.12.attn.q"), (Some(12), "attn.q"));
        assert_eq!(split_id("embed.sum"), (None, "embed.sum"));
        assert_eq!(split_id("layers.x.attn"), (None, "layers.x.attn"));
    }
}
