pub mod paths;
pub mod shell;
pub mod tier;
pub struct Gate;
impl Gate { pub fn new(_c: &crate::config::Config) -> Result<Self, String> { Ok(Gate) } }
