//! The `whittle` binary.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("whittle: the agent is not built yet (see the open issues)")
}
