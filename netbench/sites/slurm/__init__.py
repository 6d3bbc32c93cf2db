"""The slurm site: its site, launcher, transport and checks together."""
