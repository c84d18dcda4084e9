mod analyze;
mod bad;
mod load;
mod pipeline;
mod real;
mod recorded;
mod routing;
mod sessions;
