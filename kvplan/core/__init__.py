"""The pure core: errors, units, KV formats (dtypes), layer kinds, the model spec and sizing.
No I/O, no human-readable strings; everything else in kvplan imports from here, never back."""
