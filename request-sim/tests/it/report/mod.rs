mod files;
mod merge;
mod metrics;
mod progress;
mod significance;
mod ttst;
mod unknown;
