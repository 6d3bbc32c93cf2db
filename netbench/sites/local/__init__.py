"""The local site: its site, launcher, transport and checks together."""
