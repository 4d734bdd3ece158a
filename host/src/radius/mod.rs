//! Radius (UCP) client: owned by the Radius I/O work (issue 3).
