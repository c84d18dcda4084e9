mod agent_formats;
mod analyze;
mod bad;
mod load;
mod pipeline;
mod real;
mod routing;
mod sessions;
