mod files;
mod merge;
mod metrics;
mod page;
mod progress;
mod significance;
mod ttst;
mod unknown;
