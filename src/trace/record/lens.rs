//! The logit lens's records (`--lens`, `--lens-track`): the model reads each layer's residual
//! stream out through the head and hands the readout here.

use super::Recorder;

impl Recorder {
    /// Asks for the logit lens: every layer's residual stream through the head.
    pub fn with_lens(mut self, on: bool) -> Self {
        self.lens = on;
        self
    }

    pub fn lens(&self) -> bool {
        self.lens
    }

    /// Asks the logit lens to follow these token ids (`--lens-track`).
    pub fn with_lens_track(mut self, ids: Vec<u32>) -> Self {
        self.trace.lens_track = (!ids.is_empty()).then(|| {
            ids.iter().map(|&id| crate::trace::Tracked { id, token: None, text: None, layers: Vec::new() }).collect()
        });
        self
    }

    /// The token ids the lens follows (`--lens-track`).
    pub fn lens_track(&self) -> Vec<u32> {
        self.trace.lens_track.iter().flatten().map(|t| t.id).collect()
    }

    /// One layer's ranks and probabilities of the tracked tokens: per position, per token.
    pub fn push_lens_ranks(&mut self, ranks: Vec<Vec<(usize, f32)>>) {
        for (i, t) in self.trace.lens_track.iter_mut().flatten().enumerate() {
            t.layers.push(ranks.iter().map(|row| row[i]).collect());
        }
    }

    /// One layer's logit-lens readout: per position, the top tokens.
    pub fn push_lens(&mut self, top: Vec<Vec<(u32, f32)>>) {
        let rows = top.into_iter().map(|r| {
            r.into_iter().map(|(id, prob)| crate::trace::Prediction { id, token: None, text: None, prob }).collect()
        });
        self.trace.lens.get_or_insert_with(Vec::new).push(rows.collect());
    }
}
