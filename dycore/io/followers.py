"""Files that follow the run's netCDF output snapshot by snapshot: the plane sections
(``output.sections``, :mod:`dycore.io.sections`) and the XDMF series (``output.formats: [netcdf,
xdmf]``, :mod:`dycore.io.xdmf`).

:func:`attach_followers` wraps the run's :class:`~dycore.io.netcdf.SnapshotWriter` in a
:class:`SnapshotFollowers` that writes each snapshot to the netCDF file first, then to every
follower; everything else is the wrapped writer's. ``run_from_config`` makes this one call.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from dycore.io.netcdf import FIELDS

__all__ = ["SnapshotFollowers", "attach_followers"]


class SnapshotFollowers:
    """A snapshot writer whose snapshots also go to ``followers`` (objects with
    ``write(t, fields)`` and ``close()``); every other attribute is ``writer``'s."""

    def __init__(self, writer, followers: list):
        self.writer = writer
        self.followers = followers

    def __getattr__(self, name: str) -> Any:
        return getattr(self.writer, name)

    def __enter__(self):
        self.writer.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the followers, then the wrapped writer."""
        try:
            for follower in self.followers:
                follower.close()
        finally:
            self.writer.close()

    def write_snapshot(self, t: float, fields: Mapping[str, np.ndarray],
                       step: int | None = None) -> int:
        """The netCDF snapshot (:meth:`SnapshotWriter.write_snapshot`), then each follower's."""
        index = self.writer.write_snapshot(t, fields, step=step)
        for follower in self.followers:
            follower.write(t, fields)
        return index


def attach_followers(writer, config, mesh, *, kept: int = 0):
    """``writer`` itself when the configuration asks for no section and no XDMF, else a
    :class:`SnapshotFollowers` over it. The followers' files are created anew (replacing earlier
    ones) and given the first ``kept`` snapshots of the output (a restart appending to it).

    Parameters
    ----------
    writer : SnapshotWriter
    config : Config (``output.sections``, ``output.formats``)
    mesh : Mesh (coords, tets and the tagged boundary faces)
    kept : snapshots already in the output file

    Raises
    ------
    OutputError
        A section plane misses the mesh, or a file cannot be written (names it).
    """
    from dycore import __version__
    from dycore.config import parse_section
    from dycore.io.sections import SectionWriter, section_path
    from dycore.io.xdmf import XdmfWriter, xdmf_paths

    coords, tets = np.asarray(mesh.coords, float), np.asarray(mesh.tets)
    followers = []
    try:
        for item in config.output.sections:
            axis, level = parse_section(item)
            followers.append(SectionWriter(section_path(writer.path, axis, level), coords, tets,
                                           axis, level, config_yaml=config.resolved_yaml(),
                                           version=__version__))
        if "xdmf" in config.output.formats:
            followers.append(XdmfWriter(
                xdmf_paths(writer.path)[0], coords, tets, mesh.faces, mesh.face_tags,
                units={name: units for name, (_, units) in FIELDS.items()},
                source=f"{writer.path.name}: dycore {__version__} run, written during the run"))
        if kept and followers:
            ds = writer._dataset()
            for index in range(kept):
                t = float(ds.variables["time"][index])
                fields = {name: np.asarray(ds.variables[name][index, :], dtype=float)
                          for name in FIELDS}
                for follower in followers:
                    follower.write(t, fields)
    except BaseException:
        for follower in followers:
            follower.close()
        raise
    return SnapshotFollowers(writer, followers) if followers else writer
