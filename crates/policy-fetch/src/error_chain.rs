//! An error's chain of causes as a person reads it: the one walk over
//! [`Error::source`] that every message naming a cause goes through.

use std::error::Error;

/// An error's message and each of its causes', outermost first, leaving
/// out a cause that only repeats the message of the one around it.
pub fn causes(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut messages: Vec<String> = vec![error.to_string()];
    let mut cause = error;
    while let Some(source) = cause.source() {
        let message = source.to_string();
        if messages.last() != Some(&message) {
            messages.push(message);
        }
        cause = source;
    }
    messages
}

/// The whole chain on one line, `outer: cause: innermost cause`: an
/// "error sending request" alone hides the "Connection refused" or the TLS
/// failure beneath it.
pub fn joined(error: &(dyn Error + 'static)) -> String {
    causes(error).join(": ")
}

/// The innermost cause's message (for example "Connection refused (os
/// error 111)"), without the wrappers around it.
pub fn innermost(error: &(dyn Error + 'static)) -> String {
    causes(error).pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and, maybe, a cause.
    #[derive(Debug)]
    struct Link(&'static str, Option<Box<Link>>);

    impl std::fmt::Display for Link {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Link {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1
                .as_deref()
                .map(|cause| cause as &(dyn Error + 'static))
        }
    }

    fn chain(messages: &[&'static str]) -> Link {
        let (last, rest) = messages.split_last().expect("one message at least");
        rest.iter().rev().fold(Link(last, None), |cause, message| {
            Link(message, Some(Box::new(cause)))
        })
    }

    #[test]
    fn a_chain_reads_outermost_first_without_a_cause_that_repeats_its_wrapper() {
        let error = chain(&[
            "error sending request",
            "client error (Connect)",
            "client error (Connect)",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            causes(&error),
            [
                "error sending request",
                "client error (Connect)",
                "Connection refused (os error 111)"
            ]
        );
        assert_eq!(
            joined(&error),
            "error sending request: client error (Connect): Connection refused (os error 111)"
        );
        assert_eq!(innermost(&error), "Connection refused (os error 111)");
    }

    #[test]
    fn an_error_without_a_cause_is_its_own_message() {
        let error = chain(&["no such file"]);
        assert_eq!(causes(&error), ["no such file"]);
        assert_eq!(joined(&error), "no such file");
        assert_eq!(innermost(&error), "no such file");
    }

    #[test]
    fn only_a_cause_repeating_the_one_just_around_it_is_left_out() {
        let error = chain(&["a", "b", "a"]);
        assert_eq!(joined(&error), "a: b: a");
    }
}
