//! Where a model's layers are: made already, or read from its file one layer at a time as
//! the forward pass reaches them, the next read while this one runs.

use super::LayerParams;

/// Where the layers' parameters are: made already, or read from the checkpoint one layer
/// at a time as the forward pass reaches it (in f32 only while that layer runs), so a model
/// whose weights do not fit in memory as f32 can still be traced.
#[derive(Clone)]
pub enum Layers {
    Ready(Vec<LayerParams>),
    /// `first` is layer 0 as the source read it to check the checkpoint before anything ran;
    /// the first pass over the layers uses it instead of reading it again.
    Lazy {
        count: usize,
        load: LoadLayer,
        first: std::sync::Arc<std::sync::Mutex<Option<LayerParams>>>,
    },
}

/// Reads and converts one layer's parameters.
pub type LoadLayer = std::sync::Arc<dyn Fn(usize) -> anyhow::Result<LayerParams> + Send + Sync>;

impl std::fmt::Debug for Layers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layers::Ready(v) => write!(f, "Layers::Ready({} layers)", v.len()),
            Layers::Lazy { count, .. } => write!(f, "Layers::Lazy({count} layers)"),
        }
    }
}

impl Layers {
    pub fn len(&self) -> usize {
        match self {
            Layers::Ready(v) => v.len(),
            Layers::Lazy { count, .. } => *count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `count` layers read by `load` as they are needed; `first` is layer 0, read already.
    pub fn lazy(count: usize, load: LoadLayer, first: LayerParams) -> Layers {
        Layers::Lazy { count, load, first: std::sync::Arc::new(std::sync::Mutex::new(Some(first))) }
    }

    /// Calls `f` on every layer in order. Lazy layers are read one ahead on a second thread,
    /// so reading (and converting or dequantizing) layer i + 1 overlaps computing layer i:
    /// at most two layers' f32 parameters exist at once.
    pub fn each(&self, f: impl FnMut(usize, &LayerParams) -> anyhow::Result<()>) -> anyhow::Result<()> {
        self.each_from(0, f)
    }

    /// [`each`](Self::each) from layer `from` on (a patched run starts where its patch is).
    pub fn each_from(
        &self,
        from: usize,
        mut f: impl FnMut(usize, &LayerParams) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let (count, load, first) = match self {
            Layers::Ready(v) => return v.iter().enumerate().skip(from).try_for_each(|(i, l)| f(i, l)),
            Layers::Lazy { count, load, first } => (*count, load, first),
        };
        // Layer 0 as the source's check read it, the first time only (a patching sweep
        // passes over the layers again).
        let mut cached = if from == 0 { first.lock().ok().and_then(|mut first| first.take()) } else { None };
        std::thread::scope(|s| {
            let read = |i: usize| {
                let load = load.clone();
                s.spawn(move || load(i))
            };
            let mut next = (from < count && cached.is_none()).then(|| read(from));
            for i in from..count {
                let this = match cached.take() {
                    Some(layer) => Some(Ok(Ok(layer))),
                    None => next.take().map(|h| h.join()),
                };
                next = (i + 1 < count).then(|| read(i + 1));
                let layer = match this {
                    Some(Ok(layer)) => layer?,
                    _ => anyhow::bail!("internal: reading layer {i} failed"),
                };
                f(i, &layer)?;
            }
            Ok(())
        })
    }

    /// Every layer made now: lazy layers read and converted once, for a caller that runs them
    /// many times (a generation's decode steps), where reading each per pass would cost a
    /// whole model's conversion per token.
    pub fn made(&self) -> anyhow::Result<Layers> {
        match self {
            Layers::Ready(_) => Ok(self.clone()),
            Layers::Lazy { count, .. } => {
                let mut all = Vec::with_capacity(*count);
                self.each(|_, p| {
                    all.push(p.clone());
                    Ok(())
                })?;
                Ok(Layers::Ready(all))
            }
        }
    }

    /// Layer `i`: borrowed when made already, read now when lazy.
    pub fn get(&self, i: usize) -> anyhow::Result<std::borrow::Cow<'_, LayerParams>> {
        match self {
            Layers::Ready(v) => {
                v.get(i).map(std::borrow::Cow::Borrowed).ok_or_else(|| anyhow::anyhow!("internal: no layer {i}"))
            }
            Layers::Lazy { load, .. } => Ok(std::borrow::Cow::Owned(load(i)?)),
        }
    }
}
