//! An encoder–decoder's trace seen as one stack's (`--stack`): the views (maps, heatmaps,
//! the summary, statistics, the walkthrough) read a trace's `layers.{i}.attn.*` steps over
//! its `tokens` and keys, so the chosen attention's steps are given those plain ids — the
//! cross-attention's (`decoder.layers.{i}.cross_attn.*`, decoder tokens × source tokens), the
//! encoder's self-attention or the decoder's — with the tokens they are over. The trace
//! itself keeps its stack-prefixed ids; only the views are derived from this copy.

use crate::settings::views::StackView;
use crate::trace::{steps, Step, Trace};

/// The trace as `view` sees it: the chosen attention under plain ids, the other stacks'
/// steps dropped; `None` for a one-stack trace.
pub fn seen_as(trace: &Trace, view: StackView) -> Option<Trace> {
    let source = trace.keys.as_ref().filter(|_| trace.config.parts.seq2seq.is_some())?;
    let (stack, from, to) = match view {
        StackView::Cross => (steps::Stack::Decoder, "cross_attn.", "attn."),
        StackView::Encoder => (steps::Stack::Encoder, "", ""),
        StackView::Decoder => (steps::Stack::Decoder, "", ""),
    };
    let mut seen = Trace { steps: Vec::new(), generation: None, attribution: None, ..trace.clone() };
    if view == StackView::Encoder {
        seen.tokens = source.tokens.clone();
        seen.texts = source.texts.clone();
        seen.token_ids = source.ids.clone();
        seen.predictions = None;
    }
    if view != StackView::Cross {
        seen.keys = None;
    }
    if let Some(s) = &trace.config.parts.seq2seq {
        if view != StackView::Encoder {
            seen.config = (*s.decoder).clone();
        }
    }
    for step in &trace.steps {
        let Some(rest) = step.id.strip_prefix(stack.prefix()) else { continue };
        let id = match steps::parse_layer_id(rest) {
            Some((_, l, name)) if view == StackView::Cross => match name.strip_prefix(from) {
                Some(n) => steps::layer_id(l, &format!("{to}{n}")),
                None => continue,
            },
            Some((_, _, name)) if name.starts_with("cross_attn.") => continue,
            _ => rest.to_string(),
        };
        let (layer, name) = crate::trace::split_id(&id);
        seen.steps.push(Step { id: id.clone(), layer, name: name.to_string(), ..step.clone() });
    }
    Some(seen)
}
