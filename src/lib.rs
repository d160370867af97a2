pub mod config;
pub mod decision;
pub mod gate;
pub mod request;
