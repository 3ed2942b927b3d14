//! What every ibtca binary's command line shares (docs/cli.md): its own
//! name in `-h`/`-V`, errors as `NAME: error: …` on stderr, exit status 2
//! for a usage error and 1 for a failure at run time, and one parser for
//! the IB identifiers (LID, QPN, GUID, P_Key) taken in hex or decimal
//! ([`ids`]).

use std::fmt::Display;
use std::process::ExitCode;

pub mod ids;

/// Exit status of a failure at run time.
pub const EXIT_RUNTIME: u8 = 1;
/// Exit status of a usage error: a bad flag or value, refused before
/// anything starts.
pub const EXIT_USAGE: u8 = 2;

/// Writes `NAME: error: MESSAGE` to stderr.
pub fn print_error(name: &str, message: impl Display) {
    eprintln!("{name}: error: {message}");
}

/// Reports a usage error; the exit status to return.
pub fn usage_error(name: &str, message: impl Display) -> ExitCode {
    print_error(name, message);
    ExitCode::from(EXIT_USAGE)
}

/// Reports a failure at run time; the exit status to return.
pub fn runtime_error(name: &str, message: impl Display) -> ExitCode {
    print_error(name, message);
    ExitCode::from(EXIT_RUNTIME)
}

/// Parses the process's arguments into `T`: `-h`/`-V` print and exit 0, an
/// error prints `NAME: error: …` (with clap's usage lines) and exits 2.
/// `T`'s command name is set to `name`.
pub fn parse<T: clap::Parser>(name: &'static str) -> T {
    match parse_from(name, std::env::args_os()) {
        Ok(t) => t,
        Err(e) => e.exit(),
    }
}

/// [`parse`] on `args` (the first is the program), without exiting.
pub fn parse_from<T, I, A>(name: &'static str, args: I) -> Result<T, ParseExit>
where
    T: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    let mut cmd = T::command().name(name).bin_name(name);
    let matches = cmd
        .try_get_matches_from_mut(args)
        .map_err(|e| render(name, e))?;
    T::from_arg_matches(&matches).map_err(|e| render(name, e.with_cmd(&cmd)))
}

/// What [`parse_from`] stops with instead of arguments: help or version
/// text (exit 0) or an error (exit 2), rendered.
#[derive(Debug)]
pub struct ParseExit {
    /// What to print.
    pub text: String,
    /// 0 (help, version) or [`EXIT_USAGE`].
    pub code: u8,
}

impl ParseExit {
    /// Prints the text (stdout for help and version, stderr for an error)
    /// and exits.
    pub fn exit(self) -> ! {
        if self.code == 0 {
            print!("{}", self.text);
        } else {
            eprint!("{}", self.text);
        }
        std::process::exit(i32::from(self.code))
    }
}

fn render(name: &str, e: clap::Error) -> ParseExit {
    use clap::error::ErrorKind;
    let text = e.render().to_string();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ParseExit { text, code: 0 },
        _ => ParseExit {
            text: match text.strip_prefix("error: ") {
                Some(rest) => format!("{name}: error: {rest}"),
                None => text,
            },
            code: EXIT_USAGE,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    #[command(version)]
    struct Args {
        #[arg(long, value_parser = ids::lid)]
        lid: Option<u16>,
    }

    #[test]
    fn errors_name_the_program_and_exit_2() {
        let e = parse_from::<Args, _, _>("ibtca-x", ["ibtca-x", "--lid", "0xc000"]).unwrap_err();
        assert_eq!(e.code, EXIT_USAGE);
        assert!(
            e.text.starts_with(
                "ibtca-x: error: invalid value '0xc000' for '--lid <LID>': \
                 LID 0xc000 is out of range 1–0xbfff"
            ),
            "{}",
            e.text
        );
        let e = parse_from::<Args, _, _>("ibtca-x", ["ibtca-x", "--bogus"]).unwrap_err();
        assert!(e
            .text
            .starts_with("ibtca-x: error: unexpected argument '--bogus'"));
        assert_eq!(e.code, EXIT_USAGE);
    }

    #[test]
    fn help_and_version_carry_the_name_and_exit_0() {
        let e = parse_from::<Args, _, _>("ibtca-x", ["whatever", "-V"]).unwrap_err();
        assert_eq!((e.code, e.text.as_str()), (0, "ibtca-x 0.1.0\n"));
        let e = parse_from::<Args, _, _>("ibtca-x", ["whatever", "--help"]).unwrap_err();
        assert_eq!(e.code, 0);
        assert!(e.text.contains("Usage: ibtca-x [OPTIONS]"), "{}", e.text);
        let a: Args = parse_from("ibtca-x", ["x", "--lid", "0x10"]).unwrap();
        assert_eq!(a.lid, Some(16));
    }
}
