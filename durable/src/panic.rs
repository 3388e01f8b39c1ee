//! The panic guard: redb panics on some damaged files, and a panic must become an
//! error the store reports, never a crash or a caller waiting for ever.

/// A caught panic and its message, if it had one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panicked(Option<String>);

impl Panicked {
    /// The panic from a caught payload (a `&str` or `String` payload is its message).
    pub fn from_payload(payload: &(dyn std::any::Any + Send)) -> Self {
        Panicked(
            payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned()),
        )
    }

    /// The panic's message, or `otherwise` for a panic without one.
    pub fn message_or(&self, otherwise: &str) -> String {
        self.0.clone().unwrap_or_else(|| otherwise.to_string())
    }
}

/// Runs `f`, turning a panic inside it into [`Panicked`]. What `f` touched may be
/// half-written when it panicked: the caller decides whether that state is still
/// usable (a read transaction's is not kept; a writer's is answered as failed).
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|payload| Panicked::from_payload(payload.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message() {
        let caught = catch_panic(|| -> u8 { panic!("page {} damaged", 7) });
        assert_eq!(
            caught.map_err(|p| p.message_or("none")),
            Err("page 7 damaged".to_string())
        );
        assert_eq!(catch_panic(|| 3), Ok(3));
        let caught = catch_panic(|| std::panic::panic_any(42u8)).expect_err("panicked");
        assert_eq!(
            caught.message_or("a panic without a message"),
            "a panic without a message"
        );
    }
}
