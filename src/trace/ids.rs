//! A layer step's id: `layers.{i}.{step}` in a one-stack model, with the stack's name before
//! it in an encoder–decoder (`encoder.layers.{i}.…`, `decoder.layers.{i}.…`). The one place
//! that formats and parses the prefix (re-exported by `steps`).

/// A stack of layers, the part of a layer step's id before `layers.`. Every model read
/// today has one stack, whose ids are `layers.{i}.{step}`; an encoder–decoder has two, run
/// as the same stack twice (the decoder's with the encoder's output as memory), named
/// `encoder.layers.{i}.{step}` and `decoder.layers.{i}.{step}`, the decoder's cross-attention
/// steps `decoder.layers.{i}.cross_attn.{q,k,v,scores,weights,…}` (queries of the decoder's
/// tokens, keys of the encoder's). docs/TRACE.md, "Stacks".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    Only,
    Encoder,
    Decoder,
}

impl Stack {
    /// What a layer step's id starts with before `layers.`.
    pub fn prefix(self) -> &'static str {
        match self {
            Stack::Only => "",
            Stack::Encoder => "encoder.",
            Stack::Decoder => "decoder.",
        }
    }
}

/// The id of `step` (`attn.weights`) in layer `l` of a one-stack model: `layers.{l}.{step}`.
pub fn layer_id(l: usize, step: &str) -> String {
    stack_layer_id(Stack::Only, l, step)
}

/// The id of `step` in layer `l` of `stack`.
pub fn stack_layer_id(stack: Stack, l: usize, step: &str) -> String {
    format!("{}layers.{l}.{step}", stack.prefix())
}

/// A layer step's id split into its stack, layer and step (`decoder.layers.3.attn.q` →
/// (Decoder, 3, `attn.q`)); `None` for an id outside the layers.
pub fn parse_layer_id(id: &str) -> Option<(Stack, usize, &str)> {
    let (stack, rest) = [Stack::Encoder, Stack::Decoder]
        .into_iter()
        .find_map(|s| id.strip_prefix(s.prefix()).map(|r| (s, r)))
        .unwrap_or((Stack::Only, id));
    let (num, step) = rest.strip_prefix("layers.")?.split_once('.')?;
    Some((stack, num.parse().ok()?, step))
}
