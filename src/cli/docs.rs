//! `sdsfs generate-docs DIR` (hidden): man pages and shell completions generated from the clap
//! definitions of `sdsfs` and `sds`, so they cannot drift from `--help`.
//!
//! Writes `DIR/man/man1/{sdsfs,sds}.1` plus one page per subcommand (`sdsfs-mount.1`, ...),
//! and `DIR/completions/` for bash (`sdsfs.bash`), zsh (`_sdsfs`) and fish (`sdsfs.fish`).

use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell;

use super::mount::SdsfsCli;
use super::sds::Cli as SdsCli;
use crate::cli::CliError;

/// Generates everything into `dir`.
pub fn generate_docs(dir: &Path) -> Result<(), CliError> {
    let man = dir.join("man").join("man1");
    let completions = dir.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).map_err(CliError::failed(d.display().to_string()))?;
    }
    for mut command in [SdsfsCli::command(), SdsCli::command()] {
        command.build();
        let name = command.get_name().to_string();
        write_man(&man, &name, command.clone())?;
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            let page = format!("{name}-{}", sub.get_name());
            write_man(&man, &page, sub.clone().name(page.clone()))?;
        }
        for (shell, file) in [
            (Shell::Bash, format!("{name}.bash")),
            (Shell::Zsh, format!("_{name}")),
            (Shell::Fish, format!("{name}.fish")),
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command, &name, &mut out);
            let path = completions.join(file);
            std::fs::write(&path, out).map_err(CliError::failed(path.display().to_string()))?;
        }
    }
    println!("wrote {} and {}", man.display(), completions.display());
    Ok(())
}

fn write_man(dir: &Path, name: &str, command: clap::Command) -> Result<(), CliError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut out)
        .map_err(CliError::failed(format!("man page {name}")))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, out).map_err(CliError::failed(path.display().to_string()))
}
