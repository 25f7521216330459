//! Integration tests, one binary with a module per area (linking candle once, not per file).

mod architecture;
mod batch;
mod bert;
mod cli;
mod common;
mod decoders;
mod diff;
mod export;
mod firsthour;
mod gguf;
mod golden;
mod hostile;
mod interventions;
mod oracle;
mod padding;
mod patching;
mod props;
mod reference;
mod seeds;
mod students;
mod textbook;
mod transformer_lens;
mod tutorial;
mod views;
mod warnings;
mod weights_meta;
