//! Feature gates as Kubernetes components take them: `--feature-gates NAME=BOOL[,NAME=BOOL…]`.
//! One parser serves `kube-gc sim-apiserver` (`WatchList`, the API server's gate), and `kube-gc
//! run` and `loadgen record` (`WatchListClient`, kube-controller-manager's).
//!
//! Invariant: a parse succeeds only when every pair names a gate the caller knows and gives it
//! `true` or `false`; gates left out keep their defaults, and a later pair overrides an earlier
//! one, as with upstream's flag. Spaces around a pair and empty pairs are ignored, so `""` leaves
//! every gate at its default.

/// A gate a component knows: its name and its value when `--feature-gates` leaves it out.
pub type Gate = (&'static str, bool);

/// The values of the `known` gates, in their order, after the pairs of `text`. The error says
/// what is wrong, for clap to print after the flag's name.
pub fn parse<const N: usize>(text: &str, known: [Gate; N]) -> Result<[bool; N], String> {
    let mut values = known.map(|(_, default)| default);
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("missing bool value for {pair}"))?;
        let value: bool = value
            .parse()
            .map_err(|_| format!("invalid value of {name}: {value}, err: not a boolean"))?;
        let index = known.iter().position(|(known, _)| *known == name).ok_or_else(|| {
            let names: Vec<&str> = known.iter().map(|(known, _)| *known).collect();
            format!("unrecognized feature gate: {name} (known: {})", names.join(", "))
        })?;
        values[index] = value;
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [Gate; 2] = [("WatchList", true), ("Other", false)];

    #[test]
    fn gates_left_out_should_keep_their_defaults() {
        assert_eq!(parse("", KNOWN), Ok([true, false]));
        assert_eq!(parse(" , ", KNOWN), Ok([true, false]));
        assert_eq!(parse("Other=true", KNOWN), Ok([true, true]));
    }

    #[test]
    fn every_pair_should_set_its_gate_and_the_last_should_win() {
        assert_eq!(parse("WatchList=false, Other=true", KNOWN), Ok([false, true]));
        assert_eq!(parse("WatchList=false,WatchList=true", KNOWN), Ok([true, false]));
    }

    #[test]
    fn a_bad_pair_should_be_refused_with_the_reason() {
        let cases = [
            (
                "Watchlist=false",
                "unrecognized feature gate: Watchlist (known: WatchList, Other)",
            ),
            ("WatchList=no", "invalid value of WatchList: no, err: not a boolean"),
            ("WatchList=", "invalid value of WatchList: , err: not a boolean"),
            ("WatchList", "missing bool value for WatchList"),
            (
                "Other=true,Nope=true",
                "unrecognized feature gate: Nope (known: WatchList, Other)",
            ),
        ];
        for (text, error) in cases {
            assert_eq!(parse(text, KNOWN), Err(error.to_string()), "{text}");
        }
    }
}
