//! Integration tests, one binary with a module per area (linking candle once, not per file).

mod architecture;
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
mod patching;
mod props;
mod reference;
mod seeds;
mod students;
mod textbook;
mod transformer_lens;
mod tutorial;
mod views;
