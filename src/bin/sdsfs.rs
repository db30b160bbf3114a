fn main() -> std::process::ExitCode {
    sdsfs::cli::mount::sdsfs_main()
}
