mod exit_status;
mod faults;
mod input;
mod keepalive;
mod limits;
mod responses;
mod security;
mod signals;
