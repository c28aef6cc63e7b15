# Models of rollout review (sample flags, re-judge jobs) live here.
