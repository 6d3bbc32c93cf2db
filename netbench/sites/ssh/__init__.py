"""The ssh site: its site, launcher, transport and checks together."""
