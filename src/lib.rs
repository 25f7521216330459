//! attn-trace traces a transformer step by step and records every intermediate tensor, named
//! and labelled by token: the token ids, token and position embeddings, per-head queries,
//! keys and values, raw and scaled scores, softmax weights, context vectors, the
//! concatenated heads, the output projection, Add & Norm, the feed-forward network and the
//! second Add & Norm, for every layer, then the output.
//!
//! The pipeline, one stage per module, data flowing one way (docs/ARCHITECTURE.md):
//!
//! [`cli`] (what was typed) → [`settings`] (checked, plain data) → [`sources`] (the input
//! text, the model's configuration and its parameters) → [`model`] (the forward pass,
//! recorded into a [`trace::Trace`]) → [`views`] (everything derived from the trace) →
//! [`render`] (one file per format) and [`export`] (trace files) → [`output`] (the only
//! place that writes). [`config`] (the model description) and [`trace`] (the data, the step
//! catalogue, the schema) are the vocabulary every stage shares. [`diff`] is a sub-command
//! built on the same trace and export modules. [`command`] is the whole command as a
//! function of its arguments, shared by the binary and the Python wheel.

pub mod analysis;
mod arithmetic;
mod batch;
mod checking;
pub mod cli;
pub mod command;
pub mod compare;
pub mod config;
pub mod diff;
pub mod error;
mod explaining;
pub mod export;
mod generating;
pub mod hook;
pub mod model;
pub mod output;
pub mod params;
pub mod render;
mod serve;
pub mod settings;
pub mod sources;
mod steering;
pub mod strict_json;
pub mod torch_rng;
pub mod trace;
pub mod views;

use anyhow::{Context, Result};
use settings::plan::Plan;
use settings::Settings;
use sources::{Loaded, Source};
use std::io::Write;
use trace::{Recorder, Selection, Trace};
use views::Views;

/// A computed run: the trace and what it was computed from.
pub struct Traced {
    pub trace: Trace,
    /// The model's final output, `[pos, d_model]` (for `--check`).
    pub output: candle_core::Tensor,
    pub loaded: Loaded,
    pub plan: Plan,
}

/// Opens the sources the settings name and checks the settings against the model.
pub fn prepare(settings: &Settings) -> Result<(Loaded, Source, Plan)> {
    prepare_printing(settings, false)
}

/// [`prepare`], with `--max-output` checked first when the steps are `printed` (on stdout, or
/// in a server's answer; not the Python API's trace, which prints nothing unless asked).
fn prepare_printing(settings: &Settings, printed: bool) -> Result<(Loaded, Source, Plan)> {
    let (mut loaded, source) = sources::open(settings)?;
    loaded.cfg.parts.query_tile = settings.query_tile;
    let mut plan = Plan::new(settings, &loaded.cfg, &loaded.tokens, loaded.texts().as_deref())?;
    plan.attribution = explaining::request(settings, &loaded)?;
    sources::tracked::lens_track(settings, &loaded)?;
    if printed {
        let (n, out) = (loaded.tokens.len(), &settings.output);
        settings::limits::output::check(&loaded.cfg, n, &plan.show, out, settings.max_output)?;
    }
    // Before any parameter or activation exists: the estimate follows what the plan records.
    // A generation's decode steps record at most what a pass over the whole sequence would.
    let n = generating::positions(settings, &loaded)?;
    plan.estimate = settings::limits::check_run(&loaded.cfg, n, (&plan.record, plan.streamed), settings)?;
    // What the forward pass changes is part of the configuration the trace records.
    loaded.cfg.interventions = plan.interventions.clone();
    settings::stacks::apply_decoder(&settings.analysis, &mut loaded.cfg)?;
    loaded.notes.extend(model::intervene::blind_note(&loaded.cfg, &loaded.tokens));
    checking::refuse_early(settings, &loaded)?;
    Ok((loaded, source, plan))
}

/// A recorder for `loaded`'s run that keeps what `selection` wants and asks a language model
/// for its `top_k` next-token predictions.
pub(crate) fn recorder(loaded: &Loaded, selection: Selection, settings: &Settings) -> Recorder {
    let mut rec = Recorder::new(loaded.tokens.clone(), loaded.cfg.clone(), selection).with_top_k(settings.output.top_k);
    let (ids, type_ids) = match &loaded.input {
        params::Input::Ids { ids, type_ids } => (Some(ids.clone()), type_ids.clone()),
        params::Input::Matrix(_) => (None, None),
    };
    rec.set_input(loaded.sentence.clone(), ids, type_ids);
    rec.set_texts(loaded.texts());
    rec.set_chat(loaded.chat.clone());
    rec
}

/// The floating-point operations of the forward pass `rec` is about to record, for
/// `--timings`: every position against every key (`config::flops`), the head as many times as
/// the pass applies it (once more per layer with `lens`).
fn forward_flops(loaded: &Loaded, params: &params::Params, rec: &Recorder, lens: bool) -> u64 {
    let n = loaded.tokens.len();
    config::forward_flops(&loaded.cfg, n, n).with_heads(model::unembed::head_runs(&loaded.cfg, params, rec, lens))
}

/// The analyses that read the run's pass (`--attribute`, `--lens`), as the settings ask.
fn reading<'p>(
    settings: &Settings,
    (loaded, params, plan): (&Loaded, &'p params::Params, &Plan),
) -> Result<analysis::Reading<'p>> {
    let lens = settings.analysis.lens.then(|| analysis::LensAsk {
        k: settings.output.top_k,
        track: sources::tracked::lens_track(settings, loaded).unwrap_or_default(),
    });
    analysis::Reading::new(&loaded.cfg, params, loaded.tokens.len(), (plan.attribution.clone(), lens))
}

/// Computes the trace the settings describe, keeping the steps they show: the library's
/// pipeline in one call, without views or rendering (`--save-weights` is still honoured).
pub fn trace(settings: &Settings) -> Result<Traced> {
    let (mut loaded, source, plan) = prepare(settings)?;
    let params = steering::params(settings, &mut loaded, |l| source.params(l))?;
    let mut files = output::Pending::default();
    output::save_weights(&params, &loaded, settings.outputs.save_weights.as_deref(), &mut files)?;
    files.commit()?;
    let mut rec = recorder(&loaded, plan.show.clone(), settings);
    let (output, generation, read) = run_model(settings, (&loaded, &params, &plan), &mut rec)?;
    let (mut trace, _) = rec.finish();
    trace.generation = generation;
    read.fill(&mut trace);
    explaining::explain(settings, (&loaded, &params), &mut trace)?;
    sources::naming::name_predictions(&mut trace, &loaded, sources::naming::own_vocab(settings));
    Ok(Traced { trace, output, loaded, plan })
}

/// The forward pass into `rec`, or with `--generate` a generation whose prompt pass it is,
/// with the analyses that read it; returns the last hidden state, the generation's record and
/// what the analyses found.
fn run_model(
    settings: &Settings,
    (loaded, params, plan): (&Loaded, &params::Params, &Plan),
    rec: &mut Recorder,
) -> Result<(candle_core::Tensor, Option<trace::generation::Generation>, analysis::Read)> {
    let reading = reading(settings, (loaded, params, plan))?;
    let registry = reading.registry(&loaded.cfg);
    let (last, generation) = match &settings.generate {
        Some(asked) => {
            let (last, generation) = generating::run(settings, (loaded, params, plan), (rec, &registry), asked)?;
            (last, Some(generation))
        }
        None => (
            model::forward(&loaded.cfg, params, &loaded.input, &mut hook::Hooks::with(rec, registry))
                .context("computing the trace")?,
            None,
        ),
    };
    Ok((last, generation, reading.finish(&loaded.cfg, rec)?))
}

/// As [`trace`], returning the trace alone.
pub fn compute(settings: &Settings) -> Result<Trace> {
    Ok(trace(settings)?.trace)
}

/// `--patch`: tokenizes the corrupted sentence as the clean one was (and `--metric`'s
/// answers), has the plan check them against the model, and runs the sweep.
fn patching(
    settings: &Settings,
    loaded: &Loaded,
    params: &crate::params::Params,
    corrupted: &str,
) -> Result<(model::patch::Sweep, Vec<String>)> {
    use settings::plan::{PatchTexts, Tokenized};
    let special = matches!(settings.model, settings::ModelChoice::Pretrained { special: true, .. });
    let split = |tok: &tokenizers::Tokenizer, text: &str, special: bool| -> Tokenized {
        let e = tok.encode(text, special).map_err(|e| e.to_string())?;
        Ok((e.get_ids().to_vec(), e.get_tokens().to_vec()))
    };
    let texts = loaded.tokenizer.as_ref().map(|tok| PatchTexts {
        corrupted: split(tok, corrupted, special),
        answers: settings.analysis.metric.as_ref().map(|(a, b)| (split(tok, a, false), split(tok, b, false))),
    });
    let (clean, type_ids) = match &loaded.input {
        params::Input::Ids { ids, type_ids } => (Some(ids.as_slice()), type_ids.clone()),
        params::Input::Matrix(_) => (None, None),
    };
    let checked = settings::plan::patching(settings, &loaded.cfg, (&loaded.tokens, clean), texts)?;
    let metric = match checked.logit_diff {
        Some((a, b, position)) => model::patch::Metric::LogitDiff { a, b, position },
        None => model::patch::Metric::OutputDistance,
    };
    let what = if settings.analysis.patch_resid { model::patch::What::Resid } else { model::patch::What::Heads };
    let corrupted_input = params::Input::Ids { ids: checked.ids, type_ids };
    let how = (what, settings.analysis.patch_attribution, settings.analysis.patch_path.as_ref());
    let sweep = model::pathpatch::any(&loaded.cfg, params, (&loaded.input, &corrupted_input), how, &metric)?;
    Ok((sweep, checked.tokens))
}

/// Runs one command line: check it, compute the trace, write it to `out`.
pub fn run(cli: cli::Cli, env: &cli::Env, out: &mut dyn Write) -> Result<()> {
    // Completions and the man page come from the clap definition itself, so they never drift.
    if let Some(shell) = cli.completions {
        // Into memory first: clap_complete panics when its writer fails (`> /dev/full`).
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut command::full_command(), "attn-trace", &mut script);
        out.write_all(&script)?;
        return Ok(());
    }
    if cli.man {
        return Ok(command::man(out)?);
    }
    let mut clock = output::Clock::new(cli.timings);
    let settings = Settings::from_cli(cli, env)?;
    output::check_files(&settings)?;
    if let Some(batch) = sources::batch::sentences(&settings)? {
        return batch::run(&settings, &batch, clock, out);
    }
    if settings.output.format == settings::Format::Jsonl {
        return stream(&settings, out, &mut clock);
    }
    let notes = |n: &[String]| output::notes(n, settings.quiet);
    let mut done = finish_timed(&settings, &notes, false, &mut clock)?;
    let cut = views::positions::cut(&done.trace, &done.views, settings.output.views.positions.as_ref())?;
    done.files.commit()?; // in place only now that nothing but stdout is left to fail
    output::stdout(cut.trace_or(&done.trace), cut.views_or(&done.views), &settings.output, done.check.as_ref(), out)?;
    if done.checked.is_ok() {
        output::notes(&done.views.screen_notes, settings.quiet);
        output::notes(&arithmetic::ggml_note(&settings, &done.trace)?.into_iter().collect::<Vec<_>>(), settings.quiet);
    }
    clock.lap("render and write");
    clock.report();
    done.checked
}

/// `--format jsonl`: each step is written as it is computed.
fn stream(settings: &Settings, out: &mut dyn Write, clock: &mut output::Clock) -> Result<()> {
    let (mut loaded, source, plan) = prepare_printing(settings, true)?;
    clock.lap("open");
    clock.estimated(plan.estimate);
    let params = steering::params(settings, &mut loaded, |l| source.params(l))?;
    // Notes only once the parameters exist, so that a refusal stays one line.
    output::notes(&loaded.notes, settings.quiet);
    let mut files = output::Pending::default();
    output::save_weights(&params, &loaded, settings.outputs.save_weights.as_deref(), &mut files)?;
    clock.lap("parameters");
    let rec = recorder(&loaded, plan.record.clone(), settings);
    let flops = forward_flops(&loaded, &params, &rec, settings.analysis.lens);
    let forward = |rec: &mut Recorder| {
        model::forward(&loaded.cfg, &params, &loaded.input, &mut hook::Hooks::new(rec)).context("computing the trace")
    };
    let keep = settings.outputs.save_trace.is_some();
    let (mut trace, last) = output::stream(rec, (keep, &plan.view_record), forward, out)?;
    clock.lap_computing("forward pass and streaming", flops);
    let last = checking::last(settings, &loaded, &params, last)?;
    let saved = plan.save.as_ref().map(|file| trace.split_for_file(&plan.view_record, file));
    let checked = checking::testing(settings, &loaded, &last, (saved.as_ref().unwrap_or(&trace), &mut files))?.1;
    files.commit()?;
    clock.report();
    checked
}

/// A run computed, its files written, before anything goes to stdout: what [`run`] prints,
/// and what the Python API's `trace` returns.
pub struct Finished {
    /// The shown steps.
    pub trace: Trace,
    pub views: Views,
    /// `--check`'s report, and its verdict (an `Err` to end the run with after the output).
    pub check: Option<serde_json::Value>,
    pub checked: Result<()>,
    /// `--save-trace`'s steps, when they are not the shown ones (`Plan::save`).
    pub saved: Option<Trace>,
    /// With `maps`: every recorded head's attention map, for an HTML page drawn later (the
    /// Python API's notebook view), whatever `--steps` shows.
    pub maps: Option<views::maps::Maps>,
    /// The notes the run gave (also passed to `notes` as soon as the parameters exist).
    pub notes: Vec<String>,
    /// Files not yet in place (`finish` commits them; the command, just before stdout).
    pub files: output::Pending,
}

/// Computes the run `settings` describe, up to its output: the parameters, the trace, the
/// views, `--patch`, the files (`--save-weights`, `--html`, `--svg`, `--save-trace`) and
/// `--check`. `notes` is called once the parameters exist, so that a refusal stays one line.
pub fn finish(settings: &Settings, notes: &dyn Fn(&[String]), maps: bool) -> Result<Finished> {
    output::check_files(settings)?; // as the command does: a missing folder before the run
    let mut done = finish_timed(settings, notes, maps, &mut output::Clock::new(false))?;
    done.files.commit()?;
    Ok(done)
}

fn finish_timed(
    settings: &Settings,
    notes: &dyn Fn(&[String]),
    maps: bool,
    clock: &mut output::Clock,
) -> Result<Finished> {
    let (mut done, loaded, last) = computed(settings, notes, maps, clock)?;
    output::view_files(&done.trace, &done.views, &settings.output, &mut done.files)?;
    let saved = done.saved.as_ref().unwrap_or(&done.trace);
    let (check, checked) = checking::testing(settings, &loaded, &last, (saved, &mut done.files))?;
    Ok(Finished { check, checked, ..done })
}

/// [`finish`] up to the files: the run, its views and `--patch`, with the sources it was
/// computed from and the model's output (for `--check`).
pub(crate) fn computed(
    settings: &Settings,
    notes_now: &dyn Fn(&[String]),
    maps: bool,
    clock: &mut output::Clock,
) -> Result<(Finished, Loaded, checking::Last)> {
    let (mut loaded, source, mut plan) = prepare_printing(settings, !maps)?;
    if maps {
        keep_for_maps(settings, &loaded, &mut plan)?;
    }
    clock.lap("open");
    // A server converts a model's layers once for all its requests, when they fit.
    let (n, record) = (loaded.tokens.len(), (&plan.record, plan.streamed));
    let whole =
        sources::memo::makes_layers().then(|| settings::limits::whole_model_fits(&loaded.cfg, n, record, settings));
    let made = whole.flatten().is_some();
    clock.estimated(plan.estimate.max(whole.flatten().unwrap_or_default()));
    let params = steering::params(settings, &mut loaded, |l| source.params_once(l, made))?;
    notes_now(&loaded.notes);
    let mut files = output::Pending::default();
    output::save_weights(&params, &loaded, settings.outputs.save_weights.as_deref(), &mut files)?;
    clock.lap("parameters");
    let mut rec = recorder(&loaded, plan.record.clone(), settings);
    let reducing = views::Reducing::attach(&plan, &mut rec, &loaded.tokens, loaded.cfg.parts.lm_head.is_some());
    let (last, generation, read) = run_model(settings, (&loaded, &params, &plan), &mut rec)?;
    let last = checking::last(settings, &loaded, &params, last)?;
    let flops = match &generation {
        Some(g) => generating::flops(&loaded, g),
        None => forward_flops(&loaded, &params, &rec, settings.analysis.lens),
    };
    clock.lap_computing(if generation.is_some() { "generation" } else { "forward pass" }, flops);
    let (mut trace, _) = rec.finish();
    trace.generation = generation;
    read.fill(&mut trace);
    explaining::explain(settings, (&loaded, &params), &mut trace)?;
    sources::naming::name_predictions(&mut trace, &loaded, sources::naming::own_vocab(settings));
    let saved = file_trace(&plan, &mut trace);
    let o = &settings.output.views;
    let seen = views::stacks::seen_as(&trace, o.stack); // an encoder–decoder's attention `--stack` names
    let all_maps = maps.then(|| views::maps::maps(seen.as_ref().unwrap_or(&trace), o.merge_pieces, o.average_heads));
    let (trace, mut views) = views::derive(trace, &plan, &settings.output)?;
    reducing.fill(&mut views)?;
    clock.lap("views");
    if settings.output.params {
        views.params = Some(views::params::steps(&params, &plan.show)?);
    }
    let mut notes = loaded.notes.clone();
    let generated = trace.generation.as_ref().map(|g| generating::notes(&loaded, settings.generate.as_ref(), g));
    for said in generated.into_iter().chain(trace.attribution.as_ref().map(views::attribution::notes)) {
        notes_now(&said);
        notes.extend(said);
    }
    if let Some(corrupted) = &settings.analysis.patch {
        let (sweep, corrupted) = patching(settings, &loaded, &params, corrupted)?;
        let note: Vec<String> = views::patching::note(&sweep).into_iter().collect();
        notes_now(&note);
        notes.extend(note);
        let labels = sources::tracked::labels(loaded.tokenizer.as_ref(), &corrupted);
        if let model::patch::Metric::LogitDiff { a, b, .. } = sweep.metric {
            views.metric_labels = Some(sources::tracked::names(&loaded, sources::naming::own_vocab(settings), [a, b]));
        }
        views.attach_patching(sweep, (corrupted, labels), &trace.labels());
        clock.lap("patching sweep");
    }
    views.notes = notes.clone();
    let done = Finished { trace, views, check: None, checked: Ok(()), saved, maps: all_maps, notes, files };
    Ok((done, loaded, last))
}

/// `--save-trace`'s own trace, split off what was recorded for it and the views alike
/// (`Trace::split_for_file`); None when the shown steps are the file's (everything recorded is
/// shown and the file wants every step), which spares a copy of the whole trace.
fn file_trace(plan: &Plan, trace: &mut Trace) -> Option<Trace> {
    let file = plan.save.as_ref()?;
    if plan.record == plan.show && *file == Selection::default() {
        return None;
    }
    Some(trace.split_for_file(&plan.view_record, file))
}

/// The Python API's trace keeps every shown step and every head's map ([`Plan::for_maps`]);
/// the memory is checked again for what that records.
fn keep_for_maps(settings: &Settings, loaded: &Loaded, plan: &mut Plan) -> Result<()> {
    plan.for_maps();
    let n = loaded.tokens.len();
    settings::limits::check_run(&loaded.cfg, n, (&plan.record, plan.streamed), settings).map(|e| plan.estimate = e)
}
