//! The `cubenet` command; everything it does lives in [`cubenet::cli`].

fn main() -> std::process::ExitCode {
    cubenet::cli::main()
}
