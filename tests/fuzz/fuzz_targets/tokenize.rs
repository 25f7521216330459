//! The sentence/tokenizer path: any text, any options, must give tokens or an error.
#![no_main]
use attn_trace::sources::tokenize::{tokenize, TokenizerOptions, VocabOrder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let opts = TokenizerOptions {
        lowercase: flags & 1 != 0,
        remove_punctuation: flags & 2 != 0,
        order: if flags & 4 != 0 { VocabOrder::Sorted } else { VocabOrder::FirstSeen },
        bos: (flags & 8 != 0).then(|| "<bos>".to_string()),
        eos: (flags & 16 != 0).then(|| "<eos>".to_string()),
        remove: if flags & 32 != 0 { String::new() } else { ",".into() },
        ..Default::default()
    };
    if let Ok(t) = tokenize(&text, &opts) {
        assert_eq!(t.tokens.len(), t.ids.len());
        assert!(t.ids.iter().all(|&i| (i as usize) < t.vocab_size));
    }
});
