"""The external site: its site, launcher, transport and checks together."""
