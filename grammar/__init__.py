"""The Pol grammar (`pol.lark`), shipped as package data of `polc.grammar`."""
