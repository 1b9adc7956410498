"""The options of a cluster (cluster_options: ClusterOptions, each field with its default, help
and flag written once) and of a cell and its view (cell_options: CellOptions, ViewOptions).
"""
