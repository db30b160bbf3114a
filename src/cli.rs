//! The `sdsfs` and `sds` command lines. The binaries in `src/bin/` only call into this module.

pub mod docs;
pub mod location;
pub mod mount;
// The options' doc comments are clap's `--help` text, written for a terminal: `<hex>` there is
// a placeholder, not an HTML tag.
#[allow(rustdoc::invalid_html_tags)]
pub mod sds;
pub mod size;
pub mod status;

/// Why a command failed: the one line printed after the program's name, with the error behind
/// it (if any) kept as the source.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A refusal or failure said in words, with no error value behind it.
    #[error("{0}")]
    Message(String),
    /// What was being done, and the error it met.
    #[error("{context}: {source}")]
    Failed {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    #[error(transparent)]
    Open(#[from] location::OpenFailure),
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    /// Boxed: the annotation error is large, and every command's result carries this type.
    #[error(transparent)]
    Annotation(Box<crate::annotations::AnnotationError>),
    /// A dataset the mount cannot serve.
    #[error(transparent)]
    Unservable(#[from] crate::fs::namespace::FsError),
}

impl CliError {
    /// `context: source`, keeping the source.
    pub fn failed<E: std::error::Error + Send + Sync + 'static>(
        context: impl Into<String>,
    ) -> impl FnOnce(E) -> CliError {
        let context = context.into();
        move |source| CliError::Failed {
            context,
            source: Box::new(source),
        }
    }
}

impl From<crate::annotations::AnnotationError> for CliError {
    fn from(error: crate::annotations::AnnotationError) -> CliError {
        CliError::Annotation(Box::new(error))
    }
}

impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::Message(message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> CliError {
        CliError::Message(message.to_string())
    }
}

/// What `--version` prints after the program's name: the crate version and the commit the
/// binary was built from (see `build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SDSFS_COMMIT"),
    ")"
);
