//! `tokenizer.ggml.pre`: how llama.cpp splits text into words before a byte-level BPE merges
//! each word, as a tokenizers pre-tokenizer. GGUF is llama.cpp's format, so its rules are the
//! reference: the name → type map of `llama_vocab::impl::load` and the regexes of the
//! `llm_tokenizer_bpe` constructor (`switch (vocab.get_pre_type())`), both in llama.cpp's
//! `src/llama-vocab.cpp` (as vendored by llama-cpp-python 0.3.36). Each type's regexes apply in
//! sequence, each splitting the pieces of the one before and keeping both the matches and the
//! text between them (`unicode_regex_split` in `src/unicode.cpp`): a `Split` with `Isolated`
//! per regex. The bytes of each piece are then mapped to GPT-2's byte alphabet (ByteLevel
//! without its own regex). Types that need llama.cpp's hand-written splitters (kimi-k2, afmoe,
//! tiny_aya's digit groups), a zero-width split (superbpe) or no byte mapping (gemma4,
//! sarvam-moe, whitespace) are not in the table: a file naming one is refused.
//!
//! llama.cpp matches most regexes with `std::regex` on a "collapsed" copy of the text (every
//! non-ASCII character replaced by one byte for its Unicode category, `\s` for whitespace) and
//! a few (GPT-2's, Llama 3's, Qwen2's) with hand-written loops; `fixtures/gguf/tokenize`
//! checks that Oniguruma on the real text splits the same. Where the collapsed matching differs
//! from a Unicode regex, the pattern here is adjusted to the collapsed behaviour, with a comment.

use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::SplitDelimiterBehavior;

/// One llama.cpp pre-tokenizer type: the `tokenizer.ggml.pre` names that select it, its
/// regexes in order, and whether a word that is already a token skips the merges
/// (llama.cpp's `ignore_merges`, set by the name in `load`).
pub struct Rule {
    pub names: &'static [&'static str],
    pub regexes: &'static [&'static str],
    pub ignore_merges: bool,
}

/// GPT-2's regex (LLAMA_VOCAB_PRE_TYPE_GPT2 and others; `unicode_regex_split_custom_gpt2`).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// The contractions of Llama 3's regex, any case ("(?i:'s|…)" as llama.cpp spells it).
macro_rules! contractions {
    () => {
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    };
}
/// Llama 3's regex (LLAMA_VOCAB_PRE_TYPE_LLAMA3; `unicode_regex_split_custom_llama3`).
const LLAMA3: &str = concat!(
    contractions!(),
    r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);
/// Qwen2's regex: Llama 3's with one digit per word (LLAMA_VOCAB_PRE_TYPE_QWEN2;
/// `unicode_regex_split_custom_qwen2`).
const QWEN2: &str =
    concat!(contractions!(), r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+");
/// DeepSeek V3's (LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM) and Spark 2.5's CJK and kana runs.
const CJK_KANA: &str = r"[一-龥぀-ゟ゠-ヿ]+";
/// DeepSeek's CJK and Hangul runs (LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM, DEEPSEEK_CODER), less
/// the spaces inside "ࠀ-一" that llama.cpp never sees there (see DEEPSEEK_LLM below).
const CJK_HANGUL: &str = r"[一-龥ࠀ-一가-퟿&&\S]+";
/// BLOOM's one regex (LLAMA_VOCAB_PRE_TYPE_BLOOM, PORO, GPT3_FINNISH, VIKING).
const BLOOM: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";
/// GPT-4o's letter runs split at case changes (LLAMA_VOCAB_PRE_TYPE_GPT4O, TEKKEN), as
/// llama.cpp adapts them: `((?=[\p{L}])([^a-z]))` for "upper or caseless letter".
macro_rules! cased_words {
    ($l:literal, $c:expr) => {
        concat!(
            r"[^\r\n\p{L}\p{N}]?((?=[",
            $l,
            r"])([^a-z]))*((?=[",
            $l,
            r"])([^A-Z]))+",
            $c,
            r"|[^\r\n\p{L}\p{N}]?((?=[",
            $l,
            r"])([^a-z]))+((?=[",
            $l,
            r"])([^A-Z]))*",
            $c
        )
    };
}

/// Every supported type, in the order of llama.cpp's name map; the comment names the
/// `LLAMA_VOCAB_PRE_TYPE_…` cases of `llm_tokenizer_bpe` whose regexes these are.
pub const RULES: &[Rule] = &[
    // DEFAULT: an absent or empty key too (llama.cpp warns and uses it).
    Rule {
        names: &["default"],
        regexes: &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
        ignore_merges: false,
    },
    // MINICPM5
    Rule {
        names: &["minicpm5"],
        regexes: &[
            r"\p{N}{1,3}",
            concat!(
                contractions!(),
                r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            ),
        ],
        ignore_merges: true,
    },
    // LLAMA3, and CHATGLM4 for glm4/glm5 (the same regex; both with ignore_merges).
    Rule {
        names: &[
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
            "glm4",
            "glm5",
        ],
        regexes: &[LLAMA3],
        ignore_merges: true,
    },
    // DBRX, SMAUG, and CHATGLM4 for chatglm-bpe: Llama 3's regex without ignore_merges.
    Rule { names: &["dbrx", "smaug-bpe", "chatglm-bpe"], regexes: &[LLAMA3], ignore_merges: false },
    // DEEPSEEK_LLM. llama.cpp matches a regex without `\p{…}` on the text with every
    // non-ASCII space turned into "\v", so a range of literal characters never matches one
    // (U+2028 is inside "ࠀ-一", U+3000 inside "　-。"): `&&\S` takes them out of the range
    // here. `$` (ECMAScript: the end of the piece) is `\z`. The six letters written `\x{…}`
    // are ones that Unicode normalization of this file would turn into other characters.
    Rule {
        names: &["deepseek-llm"],
        regexes: &[
            r"[\r\n]",
            r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
            r"\s?[!-/:-~！-／：-～‘-‟　-。&&\S]+",
            r"\s+\z",
            CJK_HANGUL,
            r"\p{N}+",
        ],
        ignore_merges: false,
    },
    // DEEPSEEK_CODER (its CJK range as DEEPSEEK_LLM's, less the spaces)
    Rule {
        names: &["deepseek-coder"],
        regexes: &[r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK_HANGUL, r"\p{N}"],
        ignore_merges: false,
    },
    // DEEPSEEK3_LLM, HUNYUAN_DENSE, JOYAI_LLM, HY_V4
    Rule {
        names: &["deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"],
        regexes: &[
            r"\p{N}{1,3}",
            CJK_KANA,
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
        ],
        ignore_merges: false,
    },
    // SPARK2_5
    Rule {
        names: &["spark2_5"],
        regexes: &[
            r"\p{N}{1,3}",
            CJK_KANA,
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+"##,
            r"\p{N}",
        ],
        ignore_merges: false,
    },
    // YOUTU. llama.cpp reads \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm} and \p{Lo} all as \p{L} (its
    // collapsed text has one byte for every letter), so they are \p{L} here.
    Rule {
        names: &["youtu"],
        regexes: &[
            r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
            concat!(
                r"[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]*[\p{L}\p{M}]+",
                contractions!(),
                r"?|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+[\p{L}\p{M}]*",
                contractions!(),
                r"?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            ),
        ],
        ignore_merges: true,
    },
    // FALCON
    Rule { names: &["falcon"], regexes: &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"], ignore_merges: false },
    // MPT, GPT2, OLMO, JAIS, TRILLION, GRANITE_DOCLING: GPT-2's regex alone.
    Rule {
        names: &[
            "mpt",
            "gpt-2",
            "phi-2",
            "jina-es",
            "jina-de",
            "gigachat",
            "jina-v2-es",
            "jina-v2-de",
            "a.x-4.0",
            "mellum",
            "modern-bert",
            "jina-v1-en",
            "jina-v2-code",
            "roberta-bpe",
            "olmo",
            "jais",
            "exaone4",
            "trillion",
            "granite-docling",
        ],
        regexes: &[GPT2],
        ignore_merges: false,
    },
    // STARCODER, REFACT, COMMAND_R, SMOLLM, CODESHELL, EXAONE, MINERVA, MELLUM2: every digit
    // its own word, then GPT-2's regex.
    Rule {
        names: &["starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"],
        regexes: &[r"\p{N}", GPT2],
        ignore_merges: false,
    },
    // JAIS2: Llama 3's with whitespace runs cut into powers of two.
    Rule {
        names: &["jais-2"],
        regexes: &[concat!(
            contractions!(),
            r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+",
            r"|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)",
            r"|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}"
        )],
        ignore_merges: false,
    },
    // QWEN2, STABLELM2, HUNYUAN, SOLAR_OPEN, GROK_2 (the same regex).
    Rule {
        names: &[
            "qwen2",
            "deepseek-r1-qwen",
            "kormo",
            "f2llmv2",
            "stablelm2",
            "megrez",
            "hunyuan",
            "grok-2",
            "solar-open",
        ],
        regexes: &[QWEN2],
        ignore_merges: false,
    },
    // QWEN35: letter runs take combining marks.
    Rule {
        names: &["qwen35"],
        regexes: &[concat!(
            contractions!(),
            r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
        )],
        ignore_merges: false,
    },
    // PORO, BLOOM, GPT3_FINNISH
    Rule { names: &["poro-chat", "bloom", "gpt3-finnish"], regexes: &[BLOOM], ignore_merges: false },
    // VIKING
    Rule { names: &["viking"], regexes: &[BLOOM, r"\p{N}"], ignore_merges: false },
    // TEKKEN
    Rule {
        names: &["tekken"],
        regexes: &[concat!(cased_words!(r"\p{L}", ""), r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")],
        ignore_merges: true,
    },
    // EXAONE_MOE
    Rule {
        names: &["exaone-moe"],
        regexes: &[concat!(
            contractions!(),
            r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]",
            r"|\s+(?!\S)|\s+"
        )],
        ignore_merges: false,
    },
    // CHAMELEON
    Rule {
        names: &["chameleon"],
        regexes: &[
            "<sentinel:[0-9]+>",
            "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
            r"([\t\n]|    |  )",
            r"\p{N}",
            r"[\p{P}!-/:-@\[-`{-~]",
            GPT2,
        ],
        ignore_merges: false,
    },
    // GPT4O, MINIMAX_M2
    Rule {
        names: &["gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"],
        regexes: &[concat!(
            cased_words!(r"\p{L}", concat!(contractions!(), "?")),
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
        )],
        ignore_merges: false,
    },
    // GRANITE_EMB_MULTI
    Rule {
        names: &["granite-embed-multi-97m"],
        regexes: &[concat!(
            cased_words!(r"\p{L}\p{M}", concat!(contractions!(), "?")),
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
        )],
        ignore_merges: true,
    },
    // BAILINGMOE
    Rule {
        names: &["bailingmoe", "bailingmoe2", "llada-moe"],
        regexes: &[
            r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
        ignore_merges: false,
    },
    // SEED_CODER
    Rule {
        names: &["seed-coder"],
        regexes: &[concat!(
            contractions!(),
            r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"
        )],
        ignore_merges: false,
    },
    // UFAKZEKA: Qwen2's without the contractions.
    Rule {
        names: &["ufakzeka"],
        regexes: &[r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
        ignore_merges: false,
    },
    // LAGUNA: lines and runs of newlines first (`unicode_regex_split_custom_newlines`).
    Rule { names: &["laguna"], regexes: &[r"[^\n]+|[\n]+", QWEN2], ignore_merges: false },
];

/// The rule a `tokenizer.ggml.pre` value selects; absent or empty is llama.cpp's `default`.
pub fn rule(pre: Option<&str>) -> Option<&'static Rule> {
    let name = pre.filter(|p| !p.is_empty()).unwrap_or("default");
    RULES.iter().find(|r| r.names.contains(&name))
}

/// Every supported name, for the error that names an unsupported one.
pub fn supported() -> String {
    RULES.iter().flat_map(|r| r.names.iter().copied()).collect::<Vec<_>>().join(", ")
}

/// The rule as a tokenizers pre-tokenizer: its splits, then the byte mapping.
pub fn pre_tokenizer(rule: &Rule) -> Result<PreTokenizerWrapper, String> {
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for re in rule.regexes {
        let split = Split::new(SplitPattern::Regex(re.to_string()), SplitDelimiterBehavior::Isolated, false)
            .map_err(|e| format!("the pre-tokenizer regex {re:?} does not compile ({e})"))?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, false).into());
    Ok(Sequence::new(steps).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

    fn split(name: &str, text: &str) -> Vec<String> {
        let pre = pre_tokenizer(rule(Some(name)).unwrap()).unwrap();
        let mut s = PreTokenizedString::from(text);
        pre.pre_tokenize(&mut s).unwrap();
        let pieces = s.get_splits(OffsetReferential::Original, OffsetType::Char);
        pieces.iter().map(|(_, (a, b), _)| text.chars().skip(*a).take(b - a).collect()).collect()
    }

    #[test]
    fn every_rule_compiles_and_names_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for r in RULES {
            pre_tokenizer(r).unwrap();
            for n in r.names {
                assert!(seen.insert(*n), "{n} twice");
            }
        }
        assert_eq!(rule(None).unwrap().names[0], "default");
        assert_eq!(rule(Some("")).unwrap().names[0], "default");
        assert!(rule(Some("no-such-type")).is_none());
    }

    #[test]
    fn the_rules_differ_where_llama_cpp_says() {
        assert_eq!(split("gpt-2", "I'M print(x):\n"), ["I", "'", "M", " print", "(", "x", "):", "\n"]);
        assert_eq!(split("llama-bpe", "I'M print(x):\n"), ["I", "'M", " print", "(x", "):\n"]);
        assert_eq!(split("qwen2", "12345 ab"), ["1", "2", "3", "4", "5", " ab"]);
        // Issue 28's line of code: five words for Qwen2, six for GPT-2.
        assert_eq!(split("qwen2", "foo.bar(baz)"), ["foo", ".bar", "(baz", ")"]);
        assert_eq!(split("gpt-2", "foo.bar(baz)"), ["foo", ".", "bar", "(", "baz", ")"]);
        assert_eq!(split("llama-bpe", "12345 ab"), ["123", "45", " ab"]);
        assert_eq!(split("smollm", " 12 ab"), [" ", "1", "2", " ab"]);
        assert_eq!(split("default", " 12345"), [" ", "123", "45"]);
        // A space outside ASCII is never inside DeepSeek's literal ranges (llama.cpp sees "\v").
        assert_eq!(split("deepseek-llm", "文\tMK9\u{2028}$RE"), ["文", "\tMK", "9", "\u{2028}$", "RE"]);
    }
}
