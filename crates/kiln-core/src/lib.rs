//! kiln's core: the pipeline config model and its DAG compiler, and the traits the stage crates
//! meet through (container runtime, language model, progress reporter), so that sibling crates
//! never depend on each other.

pub mod apply;
pub mod capture;
pub mod checkout;
pub mod config;
pub mod cpu;
pub mod diff;
pub mod judge;
pub mod lm;
pub mod net;
pub mod parser_script;
pub mod paths;
pub mod reporter;
pub mod runtime;
pub mod session;
pub mod tarstream;

pub use cpu::{CpuLedger, CpuPhase};
/// Values as shown in messages: escaped to one line and cut (see [`kiln_schema::shown`]).
pub use kiln_schema::shown;
pub use lm::{
    ChatAnswer, ChatMessage, ChatRequest, FunctionCall, LanguageModel, LmError, Role, ToolCall,
    ToolSpec, Usage,
};
pub use reporter::{Event, NullReporter, Reporter};
pub use runtime::{
    ArchiveSink, ChangeKind, ContainerId, ContainerInfo, ContainerRuntime, ContainerSpec,
    DiskBound, EngineInfo, ExecOutcome, ExecSpec, FsChange, ImageBuild, ImageInfo, Limits,
    NetworkMode, OutputSink, RuntimeError,
};
pub use session::{Removals, Session};
