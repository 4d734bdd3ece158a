//! Custom resource types: owned by the CRD work.
