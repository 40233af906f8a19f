"""MJCF scenes of polc's own environments (data only): door_mjx.xml."""
