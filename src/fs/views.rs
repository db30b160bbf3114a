//! The views of a field as files: `.raw` (the tensor bytes), `.json` (the field descriptor),
//! `.npy` (NumPy header + tensor bytes) and, for rank-1 complex64 fields, the SigMF pair.

pub mod npy;
