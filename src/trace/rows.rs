//! Statistics read from attention weights as they are computed, a tile of queries at a time
//! (`--stats`, the summary table's strongest links): the model hands each tile to the
//! recorder's [`RowsFn`], so the weights of a long input are reduced without ever being held
//! whole (`config/tiles.rs`).

/// Queries `first .. first + rows` of one layer's attention weights, every head: `values` is
/// `[head, rows, width]` row-major, the weights on the first `width` keys; those on the keys
/// after them are 0 (a causal tile's queries see none of them: `model/tiled.rs`).
pub struct WeightRows<'a> {
    pub layer: usize,
    /// The first query of the tile, and how many queries the layer has in all.
    pub first: usize,
    pub queries: usize,
    pub heads: usize,
    pub rows: usize,
    pub keys: usize,
    pub width: usize,
    pub values: &'a [f32],
}

impl WeightRows<'_> {
    /// Head `g`'s rows, `[rows, width]`.
    pub fn head(&self, g: usize) -> &[f32] {
        let size = self.rows * self.width;
        &self.values[g * size..(g + 1) * size]
    }

    /// Whether this tile ends the layer.
    pub fn is_last(&self) -> bool {
        self.first + self.rows == self.queries
    }
}

/// A reader of weight tiles: each layer's tiles arrive in order of their queries.
pub type RowsFn = Box<dyn FnMut(&WeightRows) + Send>;
