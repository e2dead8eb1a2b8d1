"""Graph views: display model (:mod:`.model`), layered layout (:mod:`.layout`, pure Python, run in
a worker), scene and items (:mod:`.scene`, :mod:`.items`), the view widget (:mod:`.view`) and the
panel around it (:mod:`.panel`)."""
