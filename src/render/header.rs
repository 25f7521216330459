//! The header line of every view: what was traced, from the config the JSON document also
//! carries (the model, its block, where its parameters came from, what was changed).

use crate::config::{InitConfig, Interventions};
use crate::trace::Trace;

/// One line saying what was traced, from the config the JSON document also carries.
pub fn summary(trace: &Trace) -> String {
    let c = &trace.config;
    let plural = |n: usize, w: &str| if n == 1 { format!("{n} {w}") } else { format!("{n} {w}s") };
    // An encoder–decoder's own interventions are its encoder's; its decoder's come after.
    let stack = if c.parts.seq2seq.is_some() { "encoder: " } else { "" };
    let mut changed = if c.interventions.is_empty() {
        String::new()
    } else {
        format!(", {stack}{}", describe_interventions(&c.interventions))
    };
    if let Some(d) = c.parts.seq2seq.as_ref().map(|s| &s.decoder.interventions).filter(|i| !i.is_empty()) {
        changed.push_str(&format!(", decoder: {}", describe_interventions(d)));
    }
    if let Some(p) = &c.parts.padding {
        let pads = p.attention_mask.iter().filter(|m| **m == 0).count();
        changed.push_str(&format!(", padded on the {} to {} ({pads} pads hidden)", p.side, p.length));
    }
    let init = match (&c.model, &c.init) {
        // Stored in another type (bf16, a GGUF's quantizations): the arithmetic is still f32.
        (Some(m), _) => match &m.stored_dtype {
            Some(dt) if !c.parts.arithmetic.is_f32() => {
                format!(
                    "{} model {} ({dt} weights, computed as llama.cpp computes them: --arithmetic ggml)",
                    m.model_type, m.path
                )
            }
            Some(dt) => format!("{} model {} ({dt} weights, computed in f32)", m.model_type, m.path),
            None => format!("{} model {}", m.model_type, m.path),
        },
        // Seeded weights are as a model is before training: say so, so that nobody reads
        // meaning into which word attends to which.
        (None, InitConfig::Torch { seed, .. }) => format!("random untrained weights, seed {seed}"),
        (None, InitConfig::File { path, stored_dtype: Some(dt) }) => {
            format!("weights {path} ({dt} weights, computed in f32)")
        }
        (None, InitConfig::File { path, .. }) => format!("weights {path}"),
        (None, InitConfig::Given) => "weights given in memory".to_string(),
    };
    // An encoder–decoder: the source's tokens and the decoder's (`Trace::keys` and `tokens`).
    let tokens = match (&c.parts.seq2seq, &trace.keys) {
        (Some(_), Some(source)) => {
            format!("{} → {} decoder tokens", plural(source.tokens.len(), "source token"), trace.tokens.len())
        }
        _ => plural(trace.tokens.len(), "token"),
    };
    format!(
        "attn-trace: {tokens}, d_model {}, {} (d_k {} d_v {}), {}, {} positions{}, {}, {init}{changed}",
        c.d_model,
        plural(c.heads, "head"),
        c.d_k,
        c.d_v,
        block(c).0,
        c.positions.name(),
        if c.causal { ", causal" } else { "" },
        block(c).1,
    )
}

/// The header's words for the layer's form: (size, parts), e.g. ("d_ff 8, 1 layer",
/// "post-norm, relu"), or an attention-only module's output width and projection.
fn block(c: &crate::config::ModelConfig) -> (String, String) {
    let layers = match &c.parts.seq2seq {
        Some(s) => format!("{} encoder + {} decoder layers", c.layers, s.decoder.layers),
        None if c.layers == 1 => "1 layer".to_string(),
        None => format!("{} layers", c.layers),
    };
    let heads = if c.parts.separate_heads { ", separate head modules" } else { "" };
    if let Some(x) = &c.parts.experts {
        let shared = x.shared_d_ff.map(|d| format!(" + a shared expert of d_ff {d}")).unwrap_or_default();
        return (
            format!("{} experts of d_ff {} (top {} per token){shared}, {layers}", x.count, x.d_ff, x.top_k),
            format!("{}-norm, {}{heads}", c.norm.name(), c.activation.name()),
        );
    }
    if !c.parts.attention_only {
        let parallel = if c.parts.parallel { ", parallel attention+FFN" } else { "" };
        return (
            format!("d_ff {}, {layers}", c.d_ff),
            format!("{}-norm{parallel}, {}{heads}", c.norm.name(), c.activation.name()),
        );
    }
    let proj = if c.parts.no_out_proj { "no output projection" } else { "output projection" };
    (format!("d_out {}, {layers}", c.out_width()), format!("attention only, {proj}{heads}"))
}

/// The interventions in one line for the table header, e.g. "ablated 0.1, 1.2 (zero); knocked out 0.1:5->2".
fn describe_interventions(i: &Interventions) -> String {
    let mut parts = Vec::new();
    if !i.ablate.is_empty() {
        let heads: Vec<String> = i.ablate.iter().map(|(l, h)| format!("{l}.{h}")).collect();
        parts.push(format!("ablated {} ({})", heads.join(" "), i.ablate_mode.unwrap_or_default().name()));
    }
    if !i.ablate_cross.is_empty() {
        let heads: Vec<String> = i.ablate_cross.iter().map(|(l, h)| format!("{l}.{h}")).collect();
        parts.push(format!(
            "ablated cross-attention {} ({})",
            heads.join(" "),
            i.ablate_mode.unwrap_or_default().name()
        ));
    }
    if !i.knockout.is_empty() {
        let edges: Vec<String> = i
            .knockout
            .iter()
            .map(|k| match k.head {
                Some(h) => format!("{}.{h}:{}->{}", k.layer, k.query, k.key),
                None => format!("{}:{}->{}", k.layer, k.query, k.key),
            })
            .collect();
        parts.push(format!("knocked out {}", edges.join(" ")));
    }
    if !i.ablate_expert.is_empty() {
        let experts: Vec<String> = i.ablate_expert.iter().map(|(l, e)| format!("{l}.{e}")).collect();
        parts.push(format!("removed experts {} from routing", experts.join(" ")));
    }
    for s in &i.steer {
        let from = if s.from > 0 { format!(" from position {}", s.from) } else { String::new() };
        let norm = s.vector.iter().map(|v| (v * v) as f64).sum::<f64>().sqrt();
        parts.push(format!("steered after layer {} by {} × {} (norm {norm:.4}){from}", s.layer, s.alpha, s.source));
    }
    if !i.ablate_steps.is_empty() {
        parts.push(format!("ablated {} ({})", i.ablate_steps.join(" "), i.ablate_mode.unwrap_or_default().name()));
    }
    if !i.set.is_empty() {
        let set: Vec<String> = i.set.iter().map(|s| format!("{}={}", s.step, s.file)).collect();
        parts.push(format!("set {}", set.join(" ")));
    }
    if let Some(n) = i.induction {
        parts.push(format!("input: {n} random tokens repeated twice"));
    }
    parts.join("; ")
}
