//! A grid of numbers, layers down and heads (or positions) across, with the ends of its colour
//! scale: a patching sweep's effects (`patch.rs`), a comparison's head divergences
//! (`attn-trace compare`). The heatmap, the SVG and the HTML page draw it; what it shows is
//! said by the caller ([`GridText`]).

/// The grid the heatmaps draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// "layers", or "generated tokens" (what the rows are).
    pub down: &'static str,
    /// "heads" or "positions" (what the columns are).
    pub across: &'static str,
    /// "layer 0", "layer 1", …
    pub rows: Vec<String>,
    /// "head 0", … or "0 token", … (the clean sentence's tokens).
    pub cols: Vec<String>,
    /// Row-major values, `rows.len() × cols.len()`.
    pub values: Vec<f32>,
    /// The colour scale's ends.
    pub lo: f32,
    pub hi: f32,
    /// A signed scale (`lo` = −`hi`): drawn diverging, 0 in the middle (an attribution's
    /// grid), rather than viridis from `lo` to `hi`.
    pub signed: bool,
}

/// What a grid shows, in the renderers' words: `title` heads it ("patching effect"), `scale`
/// says what the scale's ends mean ("0 = corrupted, 1 = clean"), `value` names one cell's
/// number in the SVG's tooltips and class ("effect"), `group` the SVG group's class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridText<'a> {
    pub title: &'a str,
    pub scale: &'a str,
    pub value: &'a str,
    pub group: &'a str,
}

impl GridText<'_> {
    /// The same text with another title.
    pub fn with_title<'b>(self, title: &'b str) -> GridText<'b>
    where
        Self: 'b,
    {
        GridText { title, ..self }
    }
}
