//! The daemon's log: one line per event, every control character in it escaped, and the log
//! file opened without following links.
//!
//! Why one place: field names, ids and messages quoting them come from datasets, and any of
//! them may reach any log line (a field of a span, an error's chain, a panic's message). So the
//! writer escapes each event as a whole ([`crate::format::printable::escaped`]) except its
//! final newline, rather than each call site escaping what it logs. `tracing_subscriber`'s
//! formatter asks [`EscapingStderr`] for a writer per event and writes the formatted event into
//! it; that writer collects the event and writes it out escaped, once, when dropped, however
//! many `write` calls the event took. ANSI colours are off (their ESC would be escaped too).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::DaemonError;
use crate::format::printable::escaped_bytes;

/// Sets up the log (level from `SDSFS_LOG`, `info` by default) to stderr, which a daemonized
/// mount has pointed at `--log-file`, and the panic hook that logs each panic as one line.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SDSFS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // fuser warns of every reply dropped unsent, which happens only when a handler panicked:
    // that panic is logged as one line of our own ([`crate::fs::panics`]).
    let filter = match "fuser::reply=error".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(EscapingStderr)
        .try_init();
    crate::fs::panics::install_hook();
}

/// Hands `tracing_subscriber` one [`EventWriter`] per event, writing to stderr.
#[derive(Debug, Clone, Copy)]
pub struct EscapingStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for EscapingStderr {
    type Writer = EventWriter<std::io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        EventWriter::new(std::io::stderr())
    }
}

/// Collects one event and writes it to `out`, escaped, when dropped.
#[derive(Debug)]
pub struct EventWriter<W: Write> {
    event: Vec<u8>,
    out: W,
}

impl<W: Write> EventWriter<W> {
    pub fn new(out: W) -> EventWriter<W> {
        EventWriter {
            event: Vec::new(),
            out,
        }
    }
}

impl<W: Write> Write for EventWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.event.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for EventWriter<W> {
    fn drop(&mut self) {
        let body = self.event.strip_suffix(b"\n").unwrap_or(&self.event);
        let mut line = escaped_bytes(body).into_bytes();
        line.push(b'\n');
        // A log that cannot be written is not worth failing a request for.
        let _ = self.out.write_all(&line);
    }
}

/// Opens `--log-file` for appending: never through a symbolic link (`O_NOFOLLOW`: root's
/// daemon must not append to whatever file a user's link names), never blocking on a FIFO
/// (`O_NONBLOCK`), and only a regular file.
pub fn open_log_file(path: &Path) -> Result<std::fs::File, DaemonError> {
    let shown = path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => DaemonError::Refused(format!(
                "--log-file {shown}: a symbolic link; name the log file itself"
            )),
            _ => DaemonError::io(format!("--log-file {shown}"))(e),
        })?;
    let meta = file
        .metadata()
        .map_err(DaemonError::io(format!("--log-file {shown}")))?;
    if !meta.is_file() {
        return Err(DaemonError::Refused(format!(
            "--log-file {shown}: not a regular file"
        )));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_written_once_escaped_but_for_its_final_newline() {
        let mut out = Vec::new();
        {
            let mut writer = EventWriter::new(&mut out);
            writer
                .write_all(b"ERROR field=\"a\nINFO forged\" id=\x1b]0;owned\x07")
                .unwrap();
            writer.write_all(b" end\n").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ERROR field=\"a\\nINFO forged\" id=\\x1b]0;owned\\x07 end\n"
        );
    }
}
