mod analyze;
mod bad;
mod load;
mod real;
mod routing;
mod sessions;
