//! A small `--name value` parser for the examples (no dependency).

use crate::sunspots::ExampleError;

/// Flags and positional arguments of a command line.
pub struct Flags {
    pairs: Vec<(String, Option<String>)>,
    /// Arguments that are not flags.
    pub positional: Vec<String>,
}

impl Flags {
    /// Splits `args` into `--name value` pairs (`--name` alone for switches in
    /// `switches`) and positional arguments.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        switches: &[&str],
    ) -> Result<Self, ExampleError> {
        let mut args = args.into_iter();
        let mut flags = Flags {
            pairs: Vec::new(),
            positional: Vec::new(),
        };
        while let Some(arg) = args.next() {
            if let Some(name) = arg.strip_prefix("--") {
                if switches.contains(&name) {
                    flags.pairs.push((name.to_string(), None));
                } else {
                    let value = args
                        .next()
                        .ok_or_else(|| ExampleError::Usage(format!("--{name} needs a value")))?;
                    flags.pairs.push((name.to_string(), Some(value)));
                }
            } else {
                flags.positional.push(arg);
            }
        }
        Ok(flags)
    }

    /// Fails on a flag outside `known`.
    pub fn only(&self, known: &[&str], usage: &str) -> Result<(), ExampleError> {
        match self
            .pairs
            .iter()
            .find(|(n, _)| !known.contains(&n.as_str()))
        {
            Some((name, _)) => Err(ExampleError::Usage(format!(
                "unknown flag --{name}\n{usage}"
            ))),
            None => Ok(()),
        }
    }

    /// Whether switch `name` was given.
    pub fn switch(&self, name: &str) -> bool {
        self.pairs.iter().any(|(n, _)| n == name)
    }

    /// The value of `--name` parsed, or `default`.
    pub fn get<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, ExampleError>
    where
        T::Err: std::fmt::Display,
    {
        match self.pairs.iter().rev().find(|(n, _)| n == name) {
            Some((_, Some(value))) => value
                .parse()
                .map_err(|e| ExampleError::Usage(format!("--{name} {value}: {e}"))),
            _ => Ok(default),
        }
    }
}
