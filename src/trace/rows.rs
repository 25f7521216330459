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

/// Runs `f` on every item, the items shared among this machine's cores when `work` (values
/// to read) makes it worth starting threads: a reader's heads are independent, each read by
/// one thread in its own order, so the results do not depend on the split.
pub fn share<T: Send>(items: &mut [T], work: usize, f: impl Fn(&mut T) + Sync) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if work < 1 << 18 { 1 } else { cores.min(items.len()) };
    if threads <= 1 {
        items.iter_mut().for_each(f);
        return;
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut chunks = items.chunks_mut(per);
        let own = chunks.next();
        for chunk in chunks {
            let f = &f;
            scope.spawn(move || chunk.iter_mut().for_each(f));
        }
        own.into_iter().flatten().for_each(&f);
    });
}

#[cfg(test)]
mod tests {
    /// Every item is given to `f` exactly once, whether the work is shared among threads or not.
    #[test]
    fn share_gives_each_item_once() {
        for (len, work) in [(0, 1 << 20), (1, 1 << 20), (9, 1 << 20), (9, 10), (33, 1 << 30)] {
            let mut items: Vec<(usize, u32)> = (0..len).map(|i| (i, 0)).collect();
            super::share(&mut items, work, |(_, seen)| *seen += 1);
            assert!(items.iter().all(|&(_, seen)| seen == 1), "{len} items, work {work}: {items:?}");
        }
    }
}
