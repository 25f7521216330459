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
    let stack = if view == StackView::Encoder { steps::Stack::Encoder } else { steps::Stack::Decoder };
    let mut seen = trace.without_steps();
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
            Some((_, l, name)) if view == StackView::Cross => match name.strip_prefix("cross_attn.") {
                Some(n) => steps::layer_id(l, &format!("attn.{n}")),
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

/// One decoder token's strongest source tokens: the cross-attention's weights averaged over
/// every layer and head, as attention-based word alignment reads them (the words each
/// target token attended to).
#[derive(Debug, Clone, PartialEq)]
pub struct Aligned {
    pub position: usize,
    /// The strongest source positions with their mean weight, strongest first.
    pub sources: Vec<(usize, f32)>,
}

/// What [`derive`](super::derive) keeps of an encoder–decoder's stacks: the trace as `--stack`
/// sees it, without its steps (the summary's labels), and the alignment table.
#[derive(Debug, Clone)]
pub struct Stacks {
    pub seen: Trace,
    pub alignment: Vec<Aligned>,
    /// With `--html`: the page's three views, as bertviz draws them — the encoder's
    /// self-attention, the decoder's and the cross-attention — each a title, the trace as that
    /// attention sees it, and its maps.
    pub pages: Vec<(String, Trace, super::maps::Maps)>,
}

/// The three attentions of an encoder–decoder, titled, for the HTML page.
pub fn pages(trace: &Trace, merge: bool, average: bool) -> Vec<(String, Trace, super::maps::Maps)> {
    let views = [
        (StackView::Encoder, "Encoder self-attention (source tokens × source tokens)"),
        (StackView::Decoder, "Decoder self-attention (decoder tokens × decoder tokens, causal)"),
        (StackView::Cross, "Cross-attention (decoder tokens × source tokens)"),
    ];
    views
        .into_iter()
        .filter_map(|(v, title)| {
            let seen = seen_as(trace, v)?;
            let maps = super::maps::maps(&seen, merge, average);
            Some((title.to_string(), seen, maps))
        })
        .collect()
}

/// The alignment of every decoder token, its `top` sources each, from the cross-attention's
/// weights as [`seen_as`] names them (`layers.{i}.attn.weights`, [head, decoder, source]).
pub fn alignment(cross: &Trace, top: usize) -> Vec<Aligned> {
    let (rows, cols) = (cross.tokens.len(), cross.key_tokens().len());
    let mut sum = vec![0f64; rows * cols];
    let mut maps = 0usize;
    for step in cross.steps.iter().filter(|s| s.name == "attn.weights" && s.shape[1..] == [rows, cols]) {
        let Some(v) = step.f32s() else { continue };
        for head in v.chunks(rows * cols) {
            sum.iter_mut().zip(head).for_each(|(s, &x)| *s += x as f64);
            maps += 1;
        }
    }
    if maps == 0 {
        return Vec::new();
    }
    (0..rows)
        .map(|q| {
            let mut sources: Vec<(usize, f32)> =
                (0..cols).map(|k| (k, (sum[q * cols + k] / maps as f64) as f32)).collect();
            // Strongest first; equal weights keep the earlier source first.
            sources.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            sources.truncate(top);
            Aligned { position: q, sources }
        })
        .collect()
}
