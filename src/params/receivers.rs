//! `--patch-path`'s receivers (path patching, `analysis/patch/path.rs`): where each sender head's
//! direct path ends. Plain data, read by the settings from the flag and by the model.

/// Which input of a receiver head the path reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qkv {
    Q,
    K,
    V,
}

/// One receiver head: layer, head, and the input (its query, key or value) the path reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receiver {
    pub layer: usize,
    pub head: usize,
    pub input: Qkv,
}

/// Where the paths end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receivers {
    /// The final residual stream (`resid` or `logits`): each sender's direct effect through the
    /// final norm and the head.
    Logits,
    /// These heads' inputs (`9.6:q,9.9:q`), in the order given.
    Heads(Vec<Receiver>),
}

impl Receivers {
    /// Reads `resid`, `logits`, or a comma-separated list of `L.H:q|k|v`; the error says what
    /// is wrong with the text (the layer and head ranges are the model's to check).
    pub fn parse(text: &str) -> Result<Receivers, String> {
        let text = text.trim();
        if text == "resid" || text == "logits" {
            return Ok(Receivers::Logits);
        }
        let mut heads = Vec::new();
        for item in text.split(',').map(str::trim) {
            let bad = || format!("{item:?} is not resid, logits or LAYER.HEAD:q|k|v");
            let (at, input) = item.split_once(':').ok_or_else(bad)?;
            let input = match input {
                "q" => Qkv::Q,
                "k" => Qkv::K,
                "v" => Qkv::V,
                _ => return Err(format!("{item:?}: the input after ':' is q, k or v")),
            };
            let (layer, head) = at.split_once('.').ok_or_else(bad)?;
            let (layer, head) = (layer.parse().map_err(|_| bad())?, head.parse().map_err(|_| bad())?);
            let r = Receiver { layer, head, input };
            if heads.contains(&r) {
                return Err(format!("{item:?} is given twice"));
            }
            heads.push(r);
        }
        Ok(Receivers::Heads(heads))
    }

    /// The receivers as the reports name them.
    pub fn label(&self) -> String {
        match self {
            Receivers::Logits => "logits".to_string(),
            Receivers::Heads(heads) => {
                let one = |r: &Receiver| {
                    let input = match r.input {
                        Qkv::Q => "q",
                        Qkv::K => "k",
                        Qkv::V => "v",
                    };
                    format!("{}.{}:{input}", r.layer, r.head)
                };
                heads.iter().map(one).collect::<Vec<_>>().join(",")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_final_stream_and_head_lists() {
        assert_eq!(Receivers::parse("logits"), Ok(Receivers::Logits));
        assert_eq!(Receivers::parse("resid"), Ok(Receivers::Logits));
        let r = Receivers::parse("9.6:q, 9.9:k").unwrap();
        assert_eq!(r.label(), "9.6:q,9.9:k");
        for bad in ["9.6", "9.6:x", "9:q", "a.1:q", "1.1:q,1.1:q", ""] {
            assert!(Receivers::parse(bad).is_err(), "{bad}");
        }
    }
}
