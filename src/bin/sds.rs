//! The `sds` binary: everything lives in [`sdsfs::cli::sds`].
fn main() -> std::process::ExitCode {
    sdsfs::cli::sds::main()
}
