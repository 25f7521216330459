//! The command's definition: the main command as clap parses it, the whole command line with
//! its sub-commands (for help, completions and the man page), and the man page itself.

/// The main command's definition: [`crate::cli::Cli`], with `--model`'s help written from the
/// registry of families (which `cli` cannot read: it is a later stage), wrapped to
/// [`crate::cli::help_width`].
pub fn main_command() -> clap::Command {
    <crate::cli::Cli as clap::CommandFactory>::command()
        .mut_arg("model", |a| a.help(crate::sources::model_help()))
        .term_width(crate::cli::help_width())
}

/// The whole command line: the main command and its sub-commands, which [`main`](super::main) dispatches
/// by their first word before clap parses anything. `--help`, `attn-trace help`, `--man` and
/// `--completions` show this definition, so the sub-commands are listed there.
pub fn full_command() -> clap::Command {
    use clap::CommandFactory;
    let width = crate::cli::help_width();
    // Each sub-command's own definition names it "attn-trace diff" for its usage line.
    let sub =
        |c: clap::Command, name: &'static str| c.name(name).bin_name(format!("attn-trace {name}")).term_width(width);
    main_command()
        // The usage shows the sub-commands as a second form, not as a word after the sentences.
        .args_conflicts_with_subcommands(true)
        .subcommand(sub(crate::compare::cli::command(), "compare"))
        .subcommand(sub(crate::diff::cli::DiffCli::command(), "diff"))
        .subcommand(sub(crate::trace::schema::SchemaCli::command(), "schema"))
        .subcommand(sub(crate::serve::command(), "serve"))
        .after_help(
            "Sub-commands: attn-trace help COMMAND (or COMMAND --help) shows a sub-command's options; a \
             sentence that is one of their names is traced with attn-trace -- NAME.\n\n\
             Step ids and the JSON document are described in docs/OUTPUT.md, every option and the exit codes \
             (0 ok, 1 failure, 2 usage) in docs/OPTIONS.md.",
        )
}

/// `--man`: the command's page, whose SUBCOMMANDS section names attn-trace-diff(1) and the
/// others, then those pages, in one roff file.
pub fn man(out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let full = full_command();
    let subs = full.get_subcommands().filter(|s| s.get_name() != "help");
    let pages = subs.map(|s| s.clone().display_name(format!("attn-trace-{}", s.get_name())));
    for page in std::iter::once(full.clone()).chain(pages) {
        clap_mangen::Man::new(page).render(out)?;
    }
    Ok(())
}
