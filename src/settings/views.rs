//! The views' flags, checked (`--focus`, `--explain`, `--merge-pieces`, `--average-heads`,
//! `--html`, `--svg`) for the toy encoder and real models alike. The focus token is resolved
//! to a position by [`super::plan`], still before any tensor is computed.

use crate::cli::{self, Cli, Env};
use crate::error::usage;
use anyhow::Result;
use std::path::PathBuf;

/// What the views were asked for. Part of [`super::Output`].
#[derive(Debug, Clone, Default)]
pub struct ViewOptions {
    /// `--focus` as typed: a token or a position, resolved by [`super::plan::Plan`].
    pub focus: Option<String>,
    /// The layer the walkthrough uses: `--layer`, else 0.
    pub layer: usize,
    /// `--explain`: write every sum out term by term.
    pub explain: bool,
    /// A real model's walkthrough as tables without `--head` shows only its strongest head
    /// (a dozen heads' arithmetic is thousands of lines) and says how to see the others.
    pub strongest_head: bool,
    pub merge_pieces: bool,
    pub average_heads: bool,
    /// `--stack`: an encoder–decoder's attention the views draw.
    pub stack: StackView,
    pub html: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    /// Whether the HTML page holds a table per step: not for a real model unless `--steps`
    /// asks (all of MiniLM's steps for 20 tokens are some 18 MB of tables).
    pub html_tables: bool,
    /// `--show-positions`: the printed views' positions (`views::positions`).
    pub positions: Option<Positions>,
    /// Whether the terminal takes 24-bit colour (COLORTERM truecolor or 24bit); otherwise the
    /// heatmap uses the 256-colour palette, which every colour terminal has.
    pub truecolor: bool,
}

/// `--show-positions SPEC`: the positions the printed views keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Positions {
    /// `last:N`: the last N (all of a shorter input).
    Last(usize),
    /// A position, a range (`3-7`) or a list (`0,4-6`), in increasing order.
    List(Vec<usize>),
}

/// Parses `--show-positions`: `last:N` with N ≥ 1, else `--layer`'s lists and ranges.
fn positions(given: &str) -> Result<Positions> {
    let flag = "--show-positions";
    let Some(last) = given.trim().strip_prefix("last:") else {
        return super::index_list(flag, given).map(Positions::List);
    };
    match last.trim().parse::<usize>() {
        Ok(k) if k > 0 => Ok(Positions::Last(k)),
        _ => Err(usage(
            format!("{flag} {}", crate::error::quote(given)),
            format!("last:N takes a count of positions from 1, not {}", crate::error::quote(last)),
            "e.g. --show-positions last:3",
        )),
    }
}

/// Which of an encoder–decoder's attentions the views draw (`--stack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StackView {
    /// The decoder's cross-attention: decoder tokens × source tokens.
    #[default]
    Cross,
    /// The encoder's self-attention.
    Encoder,
    /// The decoder's self-attention.
    Decoder,
}

impl ViewOptions {
    /// Whether attention maps are shown in a derived form (words, or the mean over heads).
    pub fn derived(&self) -> bool {
        self.merge_pieces || self.average_heads
    }
}

/// Checks the views' flags among themselves (the focus token is resolved by the plan).
pub fn options(cli: &Cli, env: &Env) -> Result<ViewOptions> {
    if cli.explain && cli.focus.is_none() {
        return Err(usage("--explain", "it explains a --focus walkthrough", "add --focus TOKEN or --focus POS"));
    }
    if cli.format == cli::Format::Jsonl {
        let asked = [
            ("--focus", cli.focus.is_some()),
            ("--merge-pieces", cli.merge_pieces),
            ("--average-heads", cli.average_heads),
            ("--html", cli.html.is_some()),
            ("--svg", cli.svg.is_some()),
            ("--show-positions", cli.show_positions.is_some()),
        ];
        if let Some((flag, _)) = asked.iter().find(|(_, on)| *on) {
            return Err(usage(
                flag,
                "--format jsonl writes each step as it is computed, and the views need the whole trace",
                "use --format json, table or heatmap",
            ));
        }
    }
    if cli.show_positions.is_some() && cli.batch.is_some() {
        return Err(usage(
            "--show-positions",
            "it cuts one sentence's printed views, and --batch traces several of different lengths",
            "drop --batch or --show-positions",
        ));
    }
    if cli.average_heads && cli.head.is_some() {
        return Err(usage(
            "--average-heads",
            "--head shows the heads it names one by one, not their mean",
            "drop --head or --average-heads",
        ));
    }
    // The walkthrough and the SVG show one layer; an out-of-range --layer is refused by the plan.
    let layers = cli.layer.as_deref().map(|l| super::index_list("--layer", l)).transpose()?.unwrap_or(vec![0]);
    if layers.len() > 1 && (cli.focus.is_some() || cli.svg.is_some()) {
        let flag = if cli.focus.is_some() { "--focus" } else { "--svg" };
        return Err(usage(
            flag,
            format!("it shows one layer, and --layer names {}", layers.len()),
            "pass a single --layer N",
        ));
    }
    Ok(ViewOptions {
        stack: match cli.stack.unwrap_or_default() {
            cli::ViewStack::Cross => StackView::Cross,
            cli::ViewStack::Encoder => StackView::Encoder,
            cli::ViewStack::Decoder => StackView::Decoder,
        },
        focus: cli.focus.clone(),
        layer: layers[0],
        explain: cli.explain,
        strongest_head: cli.model.is_some() && cli.head.is_none() && cli.format == cli::Format::Table,
        merge_pieces: cli.merge_pieces,
        average_heads: cli.average_heads,
        html: cli.html.clone(),
        svg: cli.svg.clone(),
        html_tables: (cli.model.is_none() || cli.steps.is_some()) && !no_steps(cli),
        positions: cli.show_positions.as_deref().map(positions).transpose()?,
        truecolor: env.truecolor,
    })
}

/// `--steps none`: no step is shown, nor a real model's per-layer summary: only the run's
/// summary line and the predictions (and the views asked for); the steps the views read are
/// still recorded.
pub fn no_steps(cli: &Cli) -> bool {
    cli.steps.as_deref().is_some_and(|s| s.trim() == "none")
}

/// `--focus TOKEN|POS`: a number is a position; a word must occur exactly once (exact
/// spelling first, then ignoring case). Errors list the tokens with their positions.
pub fn resolve(given: &str, tokens: &[String], texts: Option<&[String]>) -> Result<usize> {
    resolve_for("--focus", given, tokens, texts)
}

/// The strings a position is found by: a real model's decoded text (`texts`) with each space
/// spelled `▁`, so that the leading-space rules below hold for every vocabulary alike, or
/// the token as spelled when there is no text.
pub fn spelling(tokens: &[String], texts: Option<&[String]>) -> Vec<String> {
    match texts {
        Some(t) => t.iter().map(|t| t.replace(' ', "▁")).collect(),
        None => tokens.to_vec(),
    }
}

/// As [`resolve`], naming `flag` in errors (`--knockout` resolves its words the same way).
/// With `texts`, a token is found by its exact spelling (`ĠcafÃ©`) or its text (` café`), then
/// as a word (`café`, `·café`).
pub fn resolve_for(flag: &str, given: &str, tokens: &[String], texts: Option<&[String]>) -> Result<usize> {
    let listing = || {
        // A huge token is cut here; control characters are escaped with the whole message.
        let short =
            |t: &str| if t.chars().count() > 40 { t.chars().take(39).chain(['…']).collect() } else { t.to_string() };
        let label = |i: usize| crate::trace::label::label(&tokens[i], texts.map(|t| t[i].as_str())).into_owned();
        let all: Vec<String> = (0..tokens.len()).map(|i| format!("{i} {}", short(&label(i)))).collect();
        format!("the tokens are {}", all.join(", "))
    };
    let (raw, spelled) = (tokens, spelling(tokens, texts));
    let tokens = spelled.as_slice();
    if let Ok(pos) = given.trim().parse::<usize>() {
        if pos < tokens.len() {
            return Ok(pos);
        }
        return Err(usage(
            format!("{flag} {}", crate::error::quote(given)),
            format!("position {pos} is past the last token ({} tokens)", tokens.len()),
            listing(),
        ));
    }
    // The exact spelling first (with texts, `tokens` are the texts: the vocabulary's own
    // spelling, `ĠcafÃ©`, is `raw`).
    let exact: Vec<usize> = (0..tokens.len()).filter(|&i| raw[i] == given || tokens[i] == given).collect();
    let by_case =
        || -> Vec<usize> { (0..tokens.len()).filter(|&i| tokens[i].to_lowercase() == given.to_lowercase()).collect() };
    // Byte-level BPE marks a leading space with `Ġ`, SentencePiece with `▁`, labels with `·`:
    // "shoes" finds "Ġshoes".
    let bare = |t: &str| t.trim_start_matches(['Ġ', '▁', '·', ' ']).to_lowercase();
    let by_word = || -> Vec<usize> { (0..tokens.len()).filter(|&i| bare(&tokens[i]) == bare(given)).collect() };
    let found = if !exact.is_empty() {
        exact
    } else if !by_case().is_empty() {
        by_case()
    } else {
        by_word()
    };
    // A word the tokenizer split ("embeddings" → em ##bed ##ding ##s) is found by its first piece.
    let found = if found.is_empty() { split_word(given, tokens).iter().map(|r| r.start).collect() } else { found };
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(usage(
            format!("{flag} {}", crate::error::quote(given)),
            format!("{} is not a token of this input", crate::error::quote(given)),
            listing(),
        )),
        many => {
            let at: Vec<String> = many.iter().map(|p| p.to_string()).collect();
            Err(usage(
                format!("{flag} {}", crate::error::quote(given)),
                format!(
                    "{} is ambiguous: it occurs {} times, at positions {}",
                    crate::error::quote(given),
                    many.len(),
                    at.join(", ")
                ),
                format!("pass a position instead; {}", listing()),
            ))
        }
    }
}

/// Where `word` is spelled by two or more consecutive word pieces: a first piece, then pieces
/// that continue a word (WordPiece's `##…`; after a byte-level or SentencePiece first piece
/// with its leading-space mark, pieces without one), compared ignoring case.
pub fn split_word(word: &str, tokens: &[String]) -> Vec<std::ops::Range<usize>> {
    let word = word.to_lowercase();
    let marked = |t: &str| t.starts_with(['Ġ', '▁']);
    let mut found = Vec::new();
    for i in 0..tokens.len() {
        let mut spelled = tokens[i].trim_start_matches(['Ġ', '▁']).to_lowercase();
        for j in i + 1..tokens.len() {
            let t = &tokens[j];
            let piece = match t.strip_prefix("##") {
                Some(rest) => rest.to_lowercase(),
                None if marked(&tokens[i]) && !marked(t) => t.to_lowercase(),
                None => break,
            };
            spelled.push_str(&piece);
            if spelled == word {
                found.push(i..j + 1);
                break;
            }
            if !word.starts_with(&spelled) {
                break;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::{resolve, split_word};

    #[test]
    fn a_word_split_into_pieces_is_found_by_its_first_piece() {
        let t: Vec<String> = ["[CLS]", "the", "em", "##bed", "##ding", "##s", "[SEP]"].map(String::from).to_vec();
        assert_eq!(split_word("embeddings", &t).first(), Some(&(2..6)));
        assert_eq!(resolve("Embeddings", &t, None).unwrap(), 2);
        assert_eq!(split_word("embed", &t).first(), Some(&(2..4)));
        assert!(split_word("embedx", &t).is_empty());
        let bpe: Vec<String> = ["The", "Ġemb", "ed", "dings", "Ġare"].map(String::from).to_vec();
        assert_eq!(split_word("embeddings", &bpe).first(), Some(&(1..4)));
        assert!(resolve("embeddingsare", &bpe, None).is_err());
    }

    fn toks(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn positions_words_and_case() {
        let t = toks("my shoes are small my feet");
        assert_eq!(resolve("1", &t, None).unwrap(), 1);
        assert_eq!(resolve("feet", &t, None).unwrap(), 5);
        assert_eq!(resolve("SHOES", &t, None).unwrap(), 1);
        let e = resolve("my", &t, None).unwrap_err().to_string();
        assert!(e.contains("ambiguous") && e.contains("positions 0, 4") && e.contains("4 my"), "{e}");
        assert!(resolve("hat", &t, None).unwrap_err().to_string().contains("not a token"));
        assert!(resolve("6", &t, None).unwrap_err().to_string().contains("past the last"));
    }

    #[test]
    fn a_token_is_found_by_its_text_or_its_spelling() {
        let t: Vec<String> = ["un", "ĠcafÃ©", "Ġ3"].map(String::from).to_vec();
        let texts: Vec<String> = ["un", " café", " 3"].map(String::from).to_vec();
        for given in ["café", "CAFÉ", "·café", " café", "ĠcafÃ©"] {
            assert_eq!(resolve(given, &t, Some(&texts)).unwrap(), 1, "{given}");
        }
        // A number is a position, even where a token spells it.
        assert_eq!(resolve("2", &t, Some(&texts)).unwrap(), 2);
        assert!(resolve("3", &t, Some(&texts)).unwrap_err().to_string().contains("past the last"));
        let e = resolve("thé", &t, Some(&texts)).unwrap_err().to_string();
        assert!(e.contains("1 ·café"), "the listing shows labels: {e}");
    }

    #[test]
    fn exact_spelling_wins_over_case() {
        // Seed 003's sentence has "My" and "my": each spelling names one token.
        let t = toks("My shoes my");
        assert_eq!(resolve("My", &t, None).unwrap(), 0);
        assert_eq!(resolve("my", &t, None).unwrap(), 2);
    }
}
